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
from tests.waiting import ManualClock, wait_for_all_subtasks, wait_until


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
    wait_for_all_subtasks(cluster, client.job_id)
    return tms


def test_frozen_task_manager_is_detected_by_heartbeat_timeout() -> None:
    """On the ResourceManager's clock, moved by the test: a silent TaskManager is still a member just
    short of the 2 s timeout after its last heartbeat, and lost (its job failed, naming it) past it."""
    clock = ManualClock()
    config = MiniClusterConfig(provider="local", heartbeat_interval_ms=200, heartbeat_timeout_ms=2000, tm_log_level="WARNING")
    cluster = MiniCluster(config, clock=clock).start()
    frozen = None
    try:
        client = cluster.submit(_long_job(1))
        tm = _wait_running(cluster, client, 1)[0]
        frozen = tm.pid
        os.kill(frozen, signal.SIGSTOP)  # alive, socket open, but silent
        clock.advance(1.9, then_wait_for="_heartbeat_loop")  # a whole heartbeat round at 1.9 s since the last answer
        assert [t.tm_id for t in cluster.task_managers()] == [tm.tm_id] and client.get_job_status() is JobStatus.RUNNING
        # 2.1 s more: past the timeout even if an answer sent just before SIGSTOP arrived after the first move
        clock.advance(2.1)
        with pytest.raises(JobExecutionError) as info:
            client.get_job_execution_result(timeout=30)
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
        wait_until(lambda: all(p.poll() is not None for p in procs), timeout=10, what="the TaskManagers to exit after their JobManager", interval=0.05)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        cluster.rpc = None
        cluster.close()
