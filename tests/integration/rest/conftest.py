"""A MiniCluster (local-process TaskManagers) with the REST API in front of it, always torn down."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rest.app import create_app
from runtime.rest.client import RestClusterClient
from runtime.rest.models import ClusterInfo
from runtime.rest.server import RestServer
from runtime.version import __version__
from tests.conftest import _children_alive

TOKEN = "integration-test-token"


class TestingClusterHooks:
    """ClusterHooks double: fixed info; shutdown only counts (the fixture stops the cluster)."""

    __test__ = False

    def __init__(self) -> None:
        self.shutdown_requests = 0

    def info(self) -> ClusterInfo:
        return ClusterInfo(mode="session", started_at_ms=0, pid=os.getpid(), millrace_version=__version__)

    def shutdown(self) -> None:
        self.shutdown_requests += 1


@dataclass
class RestCluster:
    cluster: MiniCluster
    server: RestServer
    hooks: TestingClusterHooks

    @property
    def url(self) -> str:
        return self.server.url

    def client(self, token: str = TOKEN, timeout: float = 30.0) -> RestClusterClient:
        return RestClusterClient(self.url, token, timeout=timeout)


@contextlib.contextmanager
def serve_rest(cluster: MiniCluster) -> Iterator[RestCluster]:
    """The REST API (on 127.0.0.1, a free port) in front of a running cluster; stopped on exit."""
    hooks = TestingClusterHooks()
    app = create_app(cluster.dispatcher_gateway(), cluster.resource_manager_gateway(), TOKEN, hooks)
    server = RestServer(app, host="127.0.0.1", port=0).start()
    try:
        yield RestCluster(cluster, server, hooks)
    finally:
        server.stop()


def start_rest_cluster(config: MiniClusterConfig) -> Iterator[RestCluster]:
    cluster = MiniCluster(config).start()
    provider = cluster.provider
    try:
        with serve_rest(cluster) as rc:
            yield rc
    finally:
        pids = [p.pid for p in getattr(provider, "processes", {}).values()]
        cluster.close()
        assert not _children_alive(pids), f"TaskManager processes left behind: {_children_alive(pids)}"


@pytest.fixture(scope="module")
def rest_cluster() -> Iterator[RestCluster]:
    """At most three one-slot TaskManagers, so a job needing more slots is refused at submission."""
    yield from start_rest_cluster(
        MiniClusterConfig(provider="local", max_task_managers=3, heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"))
    )
