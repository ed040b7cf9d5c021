"""Leader election and retrieval on a real ZooKeeper (runtime.ha.leader): one leader of
several contenders, published only after the contender's grant returned (its jobs recovered), a
successor granted when the leader leaves or its session ends, and a fence that refuses a session
that no longer leads."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.deploy.zookeeper_server import ZooKeeperServer
from runtime.ha.leader import ZooKeeperLeaderElection, connect, read_leader, retrieve_leader
from tests.waiting import wait_until

CLUSTER = "/millrace/election-test"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


class Contender:
    def __init__(self, election_ref: list[Any]) -> None:
        self.sessions: list[str] = []
        self.revoked = 0
        self.published_at_grant: list[Any] = []
        self._ref = election_ref
        self.granted = threading.Event()

    def grant_leadership(self, session_id: str) -> None:
        election = self._ref[0]
        self.published_at_grant.append(read_leader(election.client, election.cluster_path))  # before it is published
        self.sessions.append(session_id)
        self.granted.set()

    def revoke_leadership(self) -> None:
        self.revoked += 1


def _contender(zookeeper: ZooKeeperServer, url: str, cluster: str) -> tuple[ZooKeeperLeaderElection, Contender]:
    client = connect(zookeeper.connect_string, 10_000, 4_000)
    ref: list[Any] = []
    contender = Contender(ref)
    election = ZooKeeperLeaderElection(client, cluster, 4_000, url)
    ref.append(election)
    client.ensure_path(cluster)
    election.start(contender)
    return election, contender


def test_one_leader_published_after_its_grant_and_a_successor_when_it_leaves(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    cluster = f"{CLUSTER}-1"
    first, c1 = _contender(zookeeper, "http://first", cluster)
    assert c1.granted.wait(10)
    second, c2 = _contender(zookeeper, "http://second", cluster)
    try:
        wait_until(lambda: retrieve_leader(zookeeper.connect_string, cluster).rest_url == "http://first", timeout=10, what="first published")
        assert c1.published_at_grant == [None], "the leader was published before its grant returned"
        session = c1.sessions[0]
        assert first.confirm_leadership(session) and not first.confirm_leadership("another session")
        assert not second.is_leader and not c2.sessions
        first.stop()  # leaves: its nodes go, the successor is granted at once
        assert c2.granted.wait(10)
        assert c1.revoked == 1 and not first.is_leader
        wait_until(lambda: retrieve_leader(zookeeper.connect_string, cluster).rest_url == "http://second", timeout=10, what="second published")
        assert retrieve_leader(zookeeper.connect_string, cluster).session_id == c2.sessions[0] != session
        assert second.describe()["role"] == "leader"
    finally:
        second.stop()
        for e in (first, second):
            e.client.stop()
            e.client.close()


def test_a_leader_whose_session_ends_is_revoked_and_its_session_fenced(zookeeper: ZooKeeperServer) -> None:
    cluster = f"{CLUSTER}-2"
    first, c1 = _contender(zookeeper, "http://first", cluster)
    assert c1.granted.wait(10)
    second, c2 = _contender(zookeeper, "http://second", cluster)
    try:
        session = c1.sessions[0]
        first.client.stop()  # the session ends (as when ZooKeeper expires it): its ephemeral nodes go
        assert c2.granted.wait(15)
        wait_until(lambda: c1.revoked == 1, timeout=15, what="the old leader revoked")
        assert not first.confirm_leadership(session)
        assert second.confirm_leadership(c2.sessions[0])
    finally:
        second.stop()
        second.client.stop()
        second.client.close()
        first.client.close()
