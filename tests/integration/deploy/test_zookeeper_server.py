"""A real ZooKeeper (runtime.deploy.zookeeper_server) for JobManager high availability: a standalone
server and a three-node ensemble serve kazoo, the ensemble keeps serving (same session, same
ephemeral node) when kazoo's server, the leader, is killed, stop() leaves no process, and the jars
are fetched only once."""
from __future__ import annotations

import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from runtime.deploy.zookeeper_server import JARS, ZooKeeperEnsemble, ZooKeeperServer, fetch_jars
from tests.waiting import wait_until


@pytest.fixture(scope="module", autouse=True)
def _jars() -> None:
    fetch_jars()  # from Maven Central the first time (infra/setup.sh normally did it), else nothing


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@contextmanager
def _kazoo(hosts: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=hosts, timeout=10.0, randomize_hosts=False)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _connected_port(client: KazooClient) -> int:
    return int(client._connection._socket.getpeername()[1])


def test_a_standalone_server_serves_kazoo_and_stop_leaves_no_process(tmp_path: Path) -> None:
    with ZooKeeperServer(tmp_path / "zk") as server:
        pid = server.pid
        assert pid is not None and server.alive() and server.mode() == "standalone"
        with _kazoo(server.connect_string) as client:
            client.create("/millrace/leader", b"jobmanager-1", makepath=True)
            assert client.get("/millrace/leader")[0] == b"jobmanager-1"
    assert not server.alive()
    assert _pid_gone(pid)


def test_an_ensemble_survives_losing_the_leader_kazoo_was_connected_to(tmp_path: Path) -> None:
    with ZooKeeperEnsemble(tmp_path / "zk", size=3) as ensemble:
        leader = ensemble.leader()
        assert leader is not None
        others = [n for n in ensemble.nodes if n is not leader]
        # kazoo knows all three nodes and connects to the first one: the leader
        hosts = ",".join(n.connect_string for n in [leader, *others])
        with _kazoo(hosts) as client:
            session = client.client_id[0]
            client.create("/millrace/latch", b"jobmanager-1", ephemeral=True, makepath=True)
            client.create("/millrace/checkpoints/1", b"chk-1", makepath=True)
            assert _connected_port(client) == leader.client_port

            leader.kill()
            assert not leader.alive()
            assert _pid_gone(leader.pid or 0)

            # the two survivors elect a new leader; kazoo moves to one of them within its session
            new_leader = wait_until(ensemble.leader, timeout=15, what="a new leader among the survivors", interval=0.05)
            assert new_leader in others
            wait_until(lambda: client.connected, timeout=15, what="kazoo reconnected", interval=0.05)
            assert _connected_port(client) in {n.client_port for n in others}
            assert client.client_id[0] == session  # the same session: its ephemeral node lives on
            assert client.get("/millrace/latch")[0] == b"jobmanager-1"
            client.create("/millrace/checkpoints/2", b"chk-2")
            assert sorted(client.get_children("/millrace/checkpoints")) == ["1", "2"]

        # what was written before and after the loss is on every survivor
        for node in others:
            with _kazoo(node.connect_string) as reader:
                reader.sync("/millrace/checkpoints")
                assert [reader.get(f"/millrace/checkpoints/{i}")[0] for i in (1, 2)] == [b"chk-1", b"chk-2"]
        pids = [n.pid for n in others]
    assert all(pid is not None and _pid_gone(pid) for pid in pids)


def test_fetching_the_jars_again_downloads_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"downloaded again: {args[0] if args else kwargs}")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    jars = fetch_jars()
    assert len(jars) == len(JARS) and all(j.is_file() for j in jars)
