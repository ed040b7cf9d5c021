"""The real Kafka broker the Kafka connectors are tested against (runtime.deploy.kafka_server, one
KRaft node in combined mode) does what they rely on: a topic takes records and gives them back; a
transactional producer's aborted transaction stays invisible to a read_committed consumer while a
committed one (with the consumer-group offsets sent in it) shows; a missing topic is an error, not a
new topic; and a broker started detached through the CLI is reported down once it is stopped."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from runtime.deploy.java_servers import port_free
from runtime.deploy.kafka_server import KafkaServer, read_record, status, stop_recorded
from tests.kafka_support import KafkaBroker


def test_the_broker_serves_a_metadata_request_soon_after_start(kafka: KafkaBroker) -> None:
    metadata = kafka.admin().list_topics(timeout=10)
    assert list(metadata.brokers) == [1]
    assert metadata.cluster_id == kafka.server.cluster_id
    print(f"Kafka broker served {kafka.started_in_s:.2f}s after start")


def test_a_topic_takes_records_and_gives_them_back(kafka: KafkaBroker) -> None:
    kafka.create_topic("orders", partitions=3)
    assert kafka.topic_partitions("orders") == [0, 1, 2]
    for p in range(3):
        offsets = kafka.produce("orders", [f"order-{p}-{i}" for i in range(5)], partition=p)
        assert offsets == [(p, i) for i in range(5)]
    assert kafka.consume_all("orders") == [f"order-{p}-{i}".encode() for p in range(3) for i in range(5)]


def _transactional_producer(kafka: KafkaBroker, transactional_id: str) -> Producer:
    producer = kafka.producer(**{"transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def test_an_aborted_transaction_is_invisible_to_read_committed_and_a_committed_one_visible(kafka: KafkaBroker) -> None:
    kafka.create_topic("payments", partitions=2)
    kafka.create_topic("payments-in", partitions=1)
    kafka.produce("payments-in", ["in-0", "in-1", "in-2"])
    producer = _transactional_producer(kafka, "millrace-test-payments")
    source = kafka.consumer(group_id="payments-copier")  # assigned, not subscribed: the group's offsets only

    producer.begin_transaction()
    for p in range(2):
        producer.produce("payments", f"aborted-{p}".encode(), partition=p)
    producer.flush(10)
    producer.send_offsets_to_transaction([TopicPartition("payments-in", 0, 2)], source.consumer_group_metadata(), 10)
    producer.abort_transaction(10)
    assert kafka.consume_all("payments", isolation="read_committed") == []
    assert source.committed([TopicPartition("payments-in", 0)], timeout=10)[0].offset < 0  # none

    producer.begin_transaction()
    for p in range(2):
        producer.produce("payments", f"committed-{p}".encode(), partition=p)
    producer.send_offsets_to_transaction([TopicPartition("payments-in", 0, 3)], source.consumer_group_metadata(), 10)
    producer.commit_transaction(10)

    assert kafka.consume_all("payments", isolation="read_committed") == [b"committed-0", b"committed-1"]
    assert kafka.consume_all("payments", isolation="read_uncommitted") == [b"aborted-0", b"committed-0", b"aborted-1", b"committed-1"]
    assert source.committed([TopicPartition("payments-in", 0)], timeout=10)[0].offset == 3
    source.close()


def test_a_missing_topic_is_an_error_and_is_not_created(kafka: KafkaBroker) -> None:
    with pytest.raises(KafkaException) as listing:
        kafka.topic_partitions("no-such-topic")
    assert listing.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as producing:
        kafka.produce("no-such-topic", ["lost"], timeout_s=15)
    assert producing.value.args[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC)
    assert "no-such-topic" not in kafka.admin().list_topics(timeout=10).topics


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "runtime.deploy.kafka_server", *args], capture_output=True, text=True, timeout=120, check=False)


def test_status_reports_a_detached_broker_serving_and_then_down_after_stop(tmp_path: Path) -> None:
    home = tmp_path / "kafka"
    try:
        started = _cli("start", "--home", str(home), "--port", "0")
        assert started.returncode == 0, started.stdout + started.stderr
        record = read_record(home)
        assert record is not None and started.stdout.strip() == record.bootstrap_servers
        serving, line = status(home)
        assert serving and "serving" in line and record.bootstrap_servers in line

        stopped = _cli("stop", "--home", str(home))
        assert stopped.returncode == 0 and f"stopped Kafka {record.bootstrap_servers}" in stopped.stdout
        assert not KafkaServer.adopt(record.home, record.port, record.controller_port, record.pid).alive()
        assert port_free(record.port) and port_free(record.controller_port)
        down = _cli("status", "--home", str(home))
        assert down.returncode == 1 and "down" in down.stdout
    finally:
        stop_recorded(home)  # nothing if the test got as far as stopping it
