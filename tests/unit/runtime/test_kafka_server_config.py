"""runtime.deploy.kafka_server without a JVM: the Metadata probe's request and the parsing of an
answer (Kafka's wire format, Metadata v4), cluster ids as Kafka writes them, the broker settings
the tests rely on, the jar list, and java_servers.fetch_jars refusing a jar whose sha1 is wrong."""
from __future__ import annotations

import base64
import hashlib
import io
import struct
import urllib.request
from pathlib import Path

import pytest

from runtime.deploy import java_servers
from runtime.deploy.kafka_server import JARS, KafkaServer, KafkaServerError, metadata_request, new_cluster_id, parse_metadata_response


def _string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_the_probe_asks_for_metadata_v4_of_no_topics() -> None:
    request = metadata_request("probe")
    (size,) = struct.unpack_from(">i", request)
    assert size == len(request) - 4
    api_key, version, correlation = struct.unpack_from(">hhi", request, 4)
    assert (api_key, version) == (3, 4)
    assert request[12:19] == _string("probe")
    assert request[19:] == struct.pack(">ib", 0, 0)  # no topics, no automatic creation
    assert correlation == struct.unpack_from(">i", request, 8)[0]


def test_a_metadata_answer_gives_brokers_cluster_id_and_controller() -> None:
    correlation = struct.unpack_from(">i", metadata_request(), 8)[0]
    answer = (struct.pack(">iii", correlation, 0, 2)
              + struct.pack(">i", 1) + _string("127.0.0.1") + struct.pack(">i", 9092) + _string(None)
              + struct.pack(">i", 2) + _string("127.0.0.1") + struct.pack(">i", 9093) + _string("rack-a")
              + _string("abc") + struct.pack(">ii", 1, 0))
    parsed = parse_metadata_response(answer)
    assert parsed.brokers == {1: ("127.0.0.1", 9092), 2: ("127.0.0.1", 9093)}
    assert (parsed.cluster_id, parsed.controller_id) == ("abc", 1)
    with pytest.raises(ValueError):
        parse_metadata_response(struct.pack(">i", correlation + 1) + answer[4:])


def test_cluster_ids_are_sixteen_random_bytes_in_url_safe_base64() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        assert len(text) == 22 and not text.startswith("-")
        assert len(base64.urlsafe_b64decode(text + "==")) == 16


def test_the_broker_config_is_one_combined_node_without_automatic_topics(tmp_path: Path) -> None:
    server = KafkaServer(tmp_path / "kafka", port=19092, controller_port=19093)
    server.write_config()
    settings = dict(line.split("=", 1) for line in server.config_path.read_text().splitlines() if not line.startswith("#"))
    assert settings["process.roles"] == "broker,controller"
    assert settings["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert settings["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert settings["auto.create.topics.enable"] == "false"
    assert settings["group.initial.rebalance.delay.ms"] == "0"
    for key in ("offsets.topic.replication.factor", "transaction.state.log.replication.factor", "transaction.state.log.min.isr"):
        assert settings[key] == "1"
    assert settings["log.dirs"] == str(server.data_dir)
    assert server.bootstrap_servers == "127.0.0.1:19092"
    with pytest.raises(KafkaServerError):
        KafkaServer(tmp_path / "other", port=19092, controller_port=19092)


def test_the_jar_list_names_each_artifact_once() -> None:
    artifacts = [c.rsplit(":", 1)[0] for c in JARS]
    assert len(artifacts) == len(set(artifacts))
    assert all(len(c.split(":")) == 3 for c in JARS)


def test_a_jar_whose_sha1_does_not_match_is_refused_and_a_verified_one_not_fetched_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    coordinate = "org.example:thing:1.0"
    url = java_servers.jar_url(coordinate)
    served = {url: b"the jar", url + ".sha1": b"0" * 40}
    requests: list[str] = []

    def urlopen(address: str, timeout: float | None = None) -> io.BytesIO:
        requests.append(address)
        return io.BytesIO(served[address])

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    with pytest.raises(KafkaServerError, match="refusing it"):
        java_servers.fetch_jars([coordinate], tmp_path, "Test", error=KafkaServerError)
    assert not (tmp_path / "thing-1.0.jar").exists()

    served[url + ".sha1"] = hashlib.sha1(b"the jar").hexdigest().encode() + b"  thing-1.0.jar\n"
    assert java_servers.fetch_jars([coordinate], tmp_path, "Test") == [tmp_path / "thing-1.0.jar"]
    requests.clear()
    java_servers.fetch_jars([coordinate], tmp_path, "Test")
    assert requests == []
