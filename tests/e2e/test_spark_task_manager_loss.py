"""A TaskManager killed inside a Spark executor fails the job fast; nothing is left behind."""
from __future__ import annotations

import os
import signal
import time

import pytest

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import JobExecutionError
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from tests.e2e.leftovers import alive, still_there
from tests.waiting import wait_for_all_subtasks


def slow(x: int) -> int:
    if x % 100 == 0:
        time.sleep(0.01)
    return x


def test_killed_spark_task_manager_fails_job_within_5s_and_leaves_nothing(spark) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_source(DataGeneratorSource(lambda i: i, 10_000_000, batch_size=100), WatermarkStrategy.no_watermarks(), "numbers").map(slow).print()
    with MiniCluster(MiniClusterConfig(provider="spark", tm_log_level="WARNING"), spark=spark) as cluster:
        client = cluster.submit(env.get_job_graph("spark-loss"))
        tms = cluster.wait_for_task_managers(2, timeout=120)
        wait_for_all_subtasks(cluster, client.job_id)
        victim = tms[0]
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(JobExecutionError) as info:
            client.get_job_execution_result(timeout=60)
        # the bound is the requirement (this test's name): the dead process is noticed by its closed
        # connection at once, not by a heartbeat timeout or Spark's own task failure handling
        assert time.monotonic() - t0 < 5
        assert victim.tm_id in str(info.value)
    # the cluster is closed: every TaskManager process and every Spark job of theirs is gone
    left = still_there(lambda: [t.pid for t in tms if alive(t.pid)] + list(spark.sparkContext.statusTracker().getActiveJobsIds()))
    assert left == [], f"TaskManager pids and Spark job ids left: {left}"


def test_a_task_manager_whose_spark_task_fails_before_registering_is_reported_with_the_cause(spark) -> None:
    import queue
    import socket

    from runtime.deploy.spark_provider import SparkProvider
    from runtime.jobmanager.resource_provider import TaskManagerSpec

    with socket.socket() as s:  # a port nobody listens on: the TaskManager cannot reach its JobManager
        s.bind(("127.0.0.1", 0))
        closed_port = s.getsockname()[1]
    reports: queue.Queue[tuple[str, str]] = queue.Queue()
    provider = SparkProvider(spark, log_level="WARNING")
    provider.set_termination_handler(lambda tm_id, diagnostics: reports.put((tm_id, diagnostics)))
    try:
        provider.start_task_manager("tm-unreachable", TaskManagerSpec(jm_host="127.0.0.1", jm_port=closed_port, secret="s"))
        tm_id, diagnostics = reports.get(timeout=90)
        assert tm_id == "tm-unreachable"
        assert "its Spark task ended" in diagnostics and "ConnectionRefusedError" in diagnostics, diagnostics
        assert "An error occurred while calling" not in diagnostics  # the telling line, not Py4J's preamble
    finally:
        provider.close()
    assert reports.empty()
