"""Shared by the connector tests of this package: one Kafka broker for every Kafka test (a broker
start is ~5 s of the suite), and a MiniCluster per module whose local-process TaskManagers come and
go with the jobs (and the kills)."""
from collections.abc import Iterator

import pytest

from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from tests.conftest import _children_alive
from tests.kafka_support import kafka_broker_fixture

kafka = kafka_broker_fixture(scope="package")


@pytest.fixture(scope="module")
def cluster() -> Iterator[MiniCluster]:
    """One JobManager for the module; checks at the end that no TaskManager process outlived it."""
    c = MiniCluster(MiniClusterConfig(provider="local", heartbeat_timeout_ms=5000)).start()
    provider = c.provider
    try:
        yield c
    finally:
        pids = [p.pid for p in getattr(provider, "processes", {}).values()]
        c.close()
        assert not _children_alive(pids), f"TaskManager processes left behind: {_children_alive(pids)}"
