"""A TaskManager enforces its memory budget (docs/memory.md): an over-budget job FAILS with a memory
cause naming the operator, the TaskManager and its budget, and the cluster goes on running jobs.

TaskManagers here are 64 MB task heap + 32 MB managed + 160 MB framework overhead = 256 MB (an idle
one is ~125 MB); the hoarding map keeps 10 MB per record, at most 60 records (600 MB), so a run
without enforcement stays harmless and FINISHES, which these tests reject.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import use_executor
from runtime.core.errors import JobExecutionError
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m
from runtime.rpc.messages import ResourceProfile
from runtime.taskmanager.memory import TaskManagerMemoryConfig
from tests.waiting import wait_until

BUDGET_TEXT = "256 MB (64 MB task heap + 32 MB managed memory + 160 MB framework overhead)"
RECORDS = 60
BLOCK = 10 << 20


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.fixture
def small_cluster() -> Iterator[MiniCluster]:
    cluster = MiniCluster(
        MiniClusterConfig(
            provider="local",
            task_manager_profile=ResourceProfile(cpu_cores=1, task_heap_mb=64, managed_memory_mb=32),
            task_manager_memory=TaskManagerMemoryConfig(framework_overhead_mb=160, check_interval_s=0.05, release_grace_s=1.0),
            heartbeat_timeout_ms=5000,
            tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"),
        )
    ).start()
    started: list[int] = []
    provider = cluster.provider
    original = provider.start_task_manager

    def start_and_remember(tm_id, spec):  # every TaskManager process, also replaced ones, must be gone at the end
        original(tm_id, spec)
        started.append(provider.pid_of(tm_id))

    provider.start_task_manager = start_and_remember
    try:
        yield cluster
    finally:
        cluster.close()
        assert not [pid for pid in started if pid and _alive(pid)], "TaskManager processes left behind"


def _hoarding_job(name: str, leak: bool) -> StreamExecutionEnvironment:
    """A map that keeps 10 MB per record: in its own closure (freed with the task) or, `leak`, in the process."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    kept: list[bytes] = []

    def hoard(x: int) -> int:
        block = b"x" * BLOCK  # touched pages: resident
        if leak:
            import builtins

            builtins.__dict__.setdefault("_millrace_test_leak", []).append(block)  # outlives the task
        else:
            kept.append(block)
        time.sleep(0.02)
        return x

    src = DataGeneratorSource(lambda i: i, RECORDS, batch_size=1)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "numbers").map(hoard).name("hoarding map").print()
    return env


def _run_over_budget(cluster: MiniCluster, leak: bool) -> JobExecutionError:
    env = _hoarding_job("hoarding", leak)
    with use_executor(cluster.executor()):
        with pytest.raises(JobExecutionError) as info:
            env.execute("hoarding")
    return info.value


def _small_job_result(cluster: MiniCluster, name: str = "after") -> list[int]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    with use_executor(cluster.executor()):
        return sorted(env.from_collection(list(range(100))).map(lambda x: x * 3).execute_and_collect(name))


def _task_managers_that_ran(cluster: MiniCluster, job_name: str) -> set[str]:
    gateway = cluster.dispatcher_gateway()
    [job] = [j for j in gateway.call_sync("list_jobs", m.Empty()).jobs if j.job_name == job_name]
    details: m.JobDetailsMessage = gateway.call_sync("request_job_details", m.JobIdMessage(job_id=job.job_id))
    return {s.tm_id for v in details.vertices for s in v.subtasks if s.tm_id}


def _assert_memory_cause(err: JobExecutionError, tm_id: str) -> None:
    text = str(err)
    assert err.cause_info is not None, text
    assert err.cause_info.type_name == "TaskManagerMemoryExceededError", text
    assert "FAILED" in text
    assert "hoarding map" in text  # the operator
    assert f"TaskManager {tm_id}" in text  # the TaskManager
    assert BUDGET_TEXT in text  # and its budget
    assert err.cause_info.task_manager == tm_id
    assert "TaskManagerMemoryExceededError" in err.cause_info.traceback  # raised in the task's thread


def test_over_budget_job_fails_with_a_memory_cause_and_the_next_job_runs(small_cluster: MiniCluster) -> None:
    err = _run_over_budget(small_cluster, leak=False)
    [tm] = small_cluster.task_managers()
    _assert_memory_cause(err, tm.tm_id)

    # the hoarded memory went with the failed task: the TaskManager is back under its budget and
    # runs the next job (waiting for its slot to be free keeps the ResourceManager from starting another)
    wait_until(lambda: [t.slots_free for t in small_cluster.task_managers()] == [1], timeout=30, what="the slot to be free")
    assert _small_job_result(small_cluster, "after") == [x * 3 for x in range(100)]
    assert _task_managers_that_ran(small_cluster, "after") == {tm.tm_id}


def test_a_task_manager_whose_memory_stays_high_is_replaced_not_offered_again(small_cluster: MiniCluster) -> None:
    err = _run_over_budget(small_cluster, leak=True)
    [bloated] = small_cluster.wait_for_task_managers(1)
    _assert_memory_cause(err, bloated.tm_id)

    # its memory is held outside the failed task: submitted at once, the next job is not given its slot
    # (it would fail there with a memory error it did not cause) but runs on a fresh TaskManager
    assert _small_job_result(small_cluster, "after") == [x * 3 for x in range(100)]
    assert _task_managers_that_ran(small_cluster, "after") and bloated.tm_id not in _task_managers_that_ran(small_cluster, "after")
    wait_until(lambda: not _alive(bloated.pid), timeout=30, what=f"the bloated TaskManager {bloated.tm_id} to exit")
    assert bloated.tm_id not in {t.tm_id for t in small_cluster.task_managers()}
