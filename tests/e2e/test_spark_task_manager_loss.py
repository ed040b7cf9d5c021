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
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


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
        deadline = time.monotonic() + 60
        while client.get_job_status() is not JobStatus.RUNNING or any(t.slots_free for t in cluster.task_managers()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.5)
        victim = tms[0]
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(JobExecutionError) as info:
            client.get_job_execution_result(timeout=60)
        assert time.monotonic() - t0 < 5
        assert victim.tm_id in str(info.value)
    # the cluster is closed: every TaskManager process and every Spark job of theirs is gone
    deadline = time.monotonic() + 20
    while any(_alive(t.pid) for t in tms) or spark.sparkContext.statusTracker().getActiveJobsIds():
        assert time.monotonic() < deadline, (
            [t.pid for t in tms if _alive(t.pid)], spark.sparkContext.statusTracker().getActiveJobsIds()
        )
        time.sleep(0.2)
