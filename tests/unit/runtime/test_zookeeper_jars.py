"""runtime.deploy.zookeeper_server.fetch_jars against a fake Maven Central (urlopen replaced): each jar
is checked against its published sha1, a mismatch is refused, a jar damaged on disk is fetched again,
a verified one is never fetched again, and a failed download names the artifact and its URL."""
from __future__ import annotations

import collections
import hashlib
import io
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from runtime.deploy.zookeeper_server import JARS, MAVEN_CENTRAL, ZooKeeperError, fetch_jars

ZK = "org.apache.zookeeper:zookeeper:3.9.5"
ZK_URL = f"{MAVEN_CENTRAL}/org/apache/zookeeper/zookeeper/3.9.5/zookeeper-3.9.5.jar"


class FakeCentral:
    """Serves a made-up jar for each coordinate and its `.sha1` (with the file name after the hash,
    as Maven Central sometimes writes it); counts the requests per URL."""

    def __init__(self) -> None:
        self.jars: dict[str, bytes] = {}
        self.sha1s: dict[str, str] = {}
        self.requests: collections.Counter[str] = collections.Counter()
        for coordinate in JARS:
            group, artifact, version = coordinate.split(":")
            url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
            self.jars[url] = f"jar of {coordinate}".encode()
            self.sha1s[url + ".sha1"] = hashlib.sha1(self.jars[url]).hexdigest() + f"  {artifact}-{version}.jar\n"

    def urlopen(self, url: str, timeout: float | None = None) -> io.BytesIO:
        self.requests[url] += 1
        if url in self.jars:
            return io.BytesIO(self.jars[url])
        if url in self.sha1s:
            return io.BytesIO(self.sha1s[url].encode())
        raise urllib.error.HTTPError(url, 404, "Not Found", None, None)  # type: ignore[arg-type]  # no headers in a fake 404


@pytest.fixture
def central(monkeypatch: pytest.MonkeyPatch) -> FakeCentral:
    fake = FakeCentral()
    monkeypatch.setattr(urllib.request, "urlopen", fake.urlopen)
    return fake


def test_each_jar_is_fetched_once_and_verified_ones_are_not_fetched_again(tmp_path: Path, central: FakeCentral) -> None:
    jars = fetch_jars(tmp_path)
    assert [j.name for j in jars] == [f"{c.split(':')[1]}-{c.split(':')[2]}.jar" for c in JARS]
    assert all(central.jars[url] in {j.read_bytes() for j in jars} for url in central.jars)
    assert set(central.requests) == set(central.jars) | set(central.sha1s) and set(central.requests.values()) == {1}
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*"))

    central.requests.clear()
    assert fetch_jars(tmp_path) == jars
    assert not central.requests


def test_a_download_that_does_not_match_its_sha1_is_refused(tmp_path: Path, central: FakeCentral) -> None:
    central.jars[ZK_URL] = b"not the jar Maven Central published"
    with pytest.raises(ZooKeeperError, match=f"{ZK} downloaded from {ZK_URL} has sha1 .*refusing it"):
        fetch_jars(tmp_path)
    assert not (tmp_path / "zookeeper-3.9.5.jar").exists()


def test_a_jar_damaged_on_disk_is_fetched_again(tmp_path: Path, central: FakeCentral) -> None:
    fetch_jars(tmp_path)
    (tmp_path / "zookeeper-3.9.5.jar").write_bytes(b"truncated")
    central.requests.clear()
    fetch_jars(tmp_path)
    assert (tmp_path / "zookeeper-3.9.5.jar").read_bytes() == central.jars[ZK_URL]
    assert set(central.requests) == {ZK_URL, ZK_URL + ".sha1"}


def test_a_failed_download_names_the_artifact_and_its_url(tmp_path: Path, central: FakeCentral) -> None:
    del central.jars[ZK_URL]
    with pytest.raises(ZooKeeperError, match=f"downloading {ZK} from {ZK_URL} failed"):
        fetch_jars(tmp_path)
