"""Heartbeats are the backstop for failures a closed socket does not reveal; TaskManagers die with their JobManager."""
from __future__ import annotations

import os
import signal
import time

import pytest

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import JobExecutionError
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig


def _long_job(parallelism: int):
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)

    def slow(x: int) -> int:
        if x % 100 == 0:
            time.sleep(0.01)
        return x

    env.from_source(DataGeneratorSource(lambda i: i, 10_000_000, batch_size=100), WatermarkStrategy.no_watermarks(), "numbers").map(slow).print()
    return env.get_job_graph("long")


def _wait_running(cluster: MiniCluster, client, n_tms: int) -> list:
    tms = cluster.wait_for_task_managers(n_tms, timeout=30)
    deadline = time.monotonic() + 30
    while client.get_job_status() is not JobStatus.RUNNING or any(t.slots_free for t in cluster.task_managers()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    return tms


def test_frozen_task_manager_is_detected_by_heartbeat_timeout() -> None:
    cluster = MiniCluster(MiniClusterConfig(provider="local", heartbeat_interval_ms=200, heartbeat_timeout_ms=2000, tm_log_level="WARNING")).start()
    frozen = None
    try:
        client = cluster.submit(_long_job(1))
        tm = _wait_running(cluster, client, 1)[0]
        frozen = tm.pid
        os.kill(frozen, signal.SIGSTOP)  # alive, socket open, but silent
        t0 = time.monotonic()
        with pytest.raises(JobExecutionError) as info:
            client.get_job_execution_result(timeout=30)
        assert time.monotonic() - t0 < 6
        assert "no heartbeat" in str(info.value) and tm.tm_id in str(info.value)
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGKILL)
        cluster.close()


def test_task_managers_exit_when_their_job_manager_is_gone() -> None:
    cluster = MiniCluster(MiniClusterConfig(provider="local", tm_log_level="WARNING")).start()
    procs = []
    try:
        client = cluster.submit(_long_job(2))
        _wait_running(cluster, client, 2)
        procs = list(cluster.provider.processes.values())
        cluster.rpc.stop()  # the JobManager's connections vanish without a goodbye
        deadline = time.monotonic() + 10
        while any(p.poll() is None for p in procs):
            assert time.monotonic() < deadline, "TaskManagers outlived their JobManager"
            time.sleep(0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        cluster.rpc = None
        cluster.close()
