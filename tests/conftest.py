"""Shared fixtures: MiniCluster with local-process TaskManagers, one SparkSession, layer markers."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.api.execution import use_executor
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig

_LAYERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test gets its layer's marker from its folder, so `-m unit` etc. select a layer."""
    for item in items:
        parts = Path(str(item.fspath)).parts
        for layer in _LAYERS:
            if layer in parts:
                item.add_marker(getattr(pytest.mark, layer))


def _children_alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] != "Z":
                    alive.append(pid)
        except (ProcessLookupError, FileNotFoundError):
            pass
    return alive


@pytest.fixture
def mini_cluster() -> Iterator[MiniCluster]:
    """A fresh JobManager with on-demand local-process TaskManagers; torn down even on failure."""
    config = MiniClusterConfig(provider="local", heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"))
    cluster = MiniCluster(config).start()
    provider = cluster.provider
    try:
        yield cluster
    finally:
        pids = [p.pid for p in getattr(provider, "processes", {}).values()]
        cluster.close()
        assert not _children_alive(pids), f"TaskManager processes left behind: {_children_alive(pids)}"


@pytest.fixture(scope="session")
def shared_cluster() -> Iterator[MiniCluster]:
    """One cluster for the many small API jobs (TaskManagers are reused between jobs)."""
    cluster = MiniCluster(MiniClusterConfig(provider="local", tm_log_level="WARNING")).start()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def cluster_env(shared_cluster: MiniCluster) -> Iterator[MiniCluster]:
    """`env.execute()` inside the test runs on the shared local-process cluster."""
    with use_executor(shared_cluster.executor(), global_default=True):
        yield shared_cluster


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """The one SparkSession (Delta configured) for e2e tests."""
    from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

    warehouse = tmp_path_factory.mktemp("warehouse")
    session = build_spark_session(SparkSessionConfig(master="local[4]", app_name="millrace-tests", warehouse_dir=str(warehouse)))
    try:
        yield session
    finally:
        session.stop()
