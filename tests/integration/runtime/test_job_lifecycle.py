"""Job lifecycle edges: cancel during the final commit, coordinators that cannot start, no leaks per job."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from runtime.api.connectors.base import Sink
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.operators.base import StreamOperator
from runtime.core.errors import JobExecutionError
from runtime.core.operators import OperatorCoordinator, OperatorCoordinatorContext
from runtime.core.records import RecordBatch
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.waiting import job_details, wait_for_all_subtasks, wait_until


def _alive(pid: int) -> bool:
    """Running (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class _Discard(StreamOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        pass


# the JobMaster runs in the test's process (MiniCluster): the test holds the commit open with these
COMMIT_STARTED = threading.Event()
COMMIT_MAY_END = threading.Event()


class SlowCommitCoordinator(OperatorCoordinator):
    def __init__(self, context: OperatorCoordinatorContext) -> None:
        super().__init__(context)
        self.closed_during_commit = False
        self._committing = False

    def on_job_finished(self) -> dict[str, Any]:
        self._committing = True
        COMMIT_STARTED.set()
        COMMIT_MAY_END.wait(30)  # a slow commit: it lasts until the test has tried to cancel
        self._committing = False
        return {"committed": not self.closed_during_commit}

    def close(self) -> None:
        if self._committing:
            self.closed_during_commit = True


class SlowCommitProvider:
    def create(self, context: OperatorCoordinatorContext) -> SlowCommitCoordinator:
        return SlowCommitCoordinator(context)


class SlowCommitSink(Sink):
    def create_writer(self) -> StreamOperator:
        return _Discard()

    def coordinator_provider(self) -> SlowCommitProvider:
        return SlowCommitProvider()


class BrokenProvider:
    def create(self, context: OperatorCoordinatorContext) -> Any:
        raise RuntimeError("the commit service is unreachable")


class BrokenCoordinatorSink(SlowCommitSink):
    def coordinator_provider(self) -> BrokenProvider:  # type: ignore[override]  # a provider that fails on purpose in place of the slow one
        return BrokenProvider()


def test_cancel_during_the_final_commit_is_refused_and_the_job_finishes(cluster_env: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(list(range(10))).sink_to(SlowCommitSink()).name("slow commit")
    COMMIT_STARTED.clear()
    COMMIT_MAY_END.clear()
    client = cluster_env.submit(env.get_job_graph("commit-window"))
    try:
        assert COMMIT_STARTED.wait(30), "the final commit did not start"
        client.cancel()  # arrives while the commit runs (returns once the JobMaster answered it)
    finally:
        COMMIT_MAY_END.set()
    result = client.get_job_execution_result(timeout=30)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["committed"] is True  # nothing closed the coordinator under its commit


def test_coordinator_that_cannot_start_fails_the_job_promptly(cluster_env: MiniCluster) -> None:
    """Promptly: at the coordinator's start, before any task is deployed (no slot wait, no timeout)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3]).sink_to(BrokenCoordinatorSink()).name("broken sink")
    client = cluster_env.submit(env.get_job_graph("broken-coordinator"))
    with pytest.raises(JobExecutionError) as info:
        client.get_job_execution_result(timeout=30)
    assert "the commit service is unreachable" in str(info.value)
    assert "broken sink" in str(info.value)
    details = job_details(cluster_env, client.job_id)
    assert details.status is JobStatus.FAILED
    deployed = [s.state_timestamps_ms for v in details.vertices for s in v.subtasks if "DEPLOYING" in s.state_timestamps_ms]
    assert not deployed, deployed


def test_finished_jobs_leak_no_threads_or_file_descriptors(cluster_env: MiniCluster) -> None:
    def run_one() -> None:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1, 2, 3]).map(lambda x: x + 1).print()
        cluster_env.submit(env.get_job_graph("tiny")).get_job_execution_result(timeout=30)

    def job_masters_stopped() -> bool:  # they stop off the dispatcher loop, after the result is out
        return not [t for t in threading.enumerate() if t.name.startswith("rpc-jobmaster-")]

    run_one()  # warm: TaskManagers registered, pools created
    wait_until(job_masters_stopped, timeout=30, what="the warm-up job's JobMaster to stop", interval=0.05)
    threads, fds = threading.active_count(), len(os.listdir("/proc/self/fd"))
    for _ in range(8):
        run_one()
    wait_until(job_masters_stopped, timeout=30, what="the JobMasters to stop", interval=0.05)
    assert threading.active_count() <= threads + 2, [t.name for t in threading.enumerate()]
    assert len(os.listdir("/proc/self/fd")) <= fds + 4


def test_task_stuck_in_user_code_does_not_keep_the_job_cancelling(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    from runtime.api.common import Configuration

    conf = Configuration()
    conf.set_string("task.cancellation.timeout.s", "2")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    inside = str(tmp_path / "inside")

    def stuck(x: int) -> int:
        open(inside, "w").close()
        time.sleep(3600)  # ignores cancellation
        return x

    env.from_collection([1, 2, 3]).map(stuck).name("stuck map").print()
    client = mini_cluster.submit(env.get_job_graph("stuck"))
    (tm,) = mini_cluster.wait_for_task_managers(1, timeout=30)
    wait_until(lambda: os.path.exists(inside), timeout=30, what="the map's user code to be entered", interval=0.05)
    client.cancel()
    # well under the 30 s default watchdog: the configured 2 s one ends it (the process exit, the loss report)
    with pytest.raises(JobExecutionError):
        client.get_job_execution_result(timeout=20)
    assert client.get_job_status() is JobStatus.CANCELED
    # the watchdog gave the TaskManager process up (Python cannot kill a thread)
    wait_until(lambda: not _alive(tm.pid), timeout=10, what=f"TaskManager {tm.tm_id} to exit", interval=0.05)


def test_cancel_interrupts_user_code_busy_with_a_batch_and_keeps_the_task_manager(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    """A map that takes a minute over its batch stops soon after cancel (Flink's TaskInterrupter);
    the TaskManager is not given up and its slot serves the next job."""
    from runtime.api.common import Configuration

    conf = Configuration()
    conf.set_string("task.cancellation.timeout.s", "20")  # the watchdog must not be what ends it
    env = StreamExecutionEnvironment.get_execution_environment(conf)

    inside = str(tmp_path / "inside")

    def busy(x: int) -> int:
        open(inside, "w").close()
        time.sleep(0.05)  # 1200 records in one batch: a minute of user code
        return x

    env.from_collection(list(range(1200))).map(busy).name("busy map").print()
    client = mini_cluster.submit(env.get_job_graph("busy"))
    (tm,) = mini_cluster.wait_for_task_managers(1, timeout=30)
    wait_until(lambda: os.path.exists(inside), timeout=30, what="the map busy with its batch", interval=0.05)
    client.cancel()
    with pytest.raises(JobExecutionError):
        client.get_job_execution_result(timeout=15)  # well inside the 20 s watchdog
    assert client.get_job_status() is JobStatus.CANCELED
    assert [t.tm_id for t in mini_cluster.task_managers()] == [tm.tm_id]
    os.kill(tm.pid, 0)  # still alive
    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.from_collection([1, 2, 3]).map(lambda x: x).print()
    after = mini_cluster.submit(env2.get_job_graph("after"))
    assert after.get_job_execution_result(timeout=30) is not None
    assert [t.tm_id for t in mini_cluster.task_managers()] == [tm.tm_id]


def _cancel_while_records_flow(cluster: MiniCluster, attempt: int) -> None:
    """Run a job until records reach every subtask of its last vertex, cancel it, and check that
    every subtask ended CANCELED."""
    from runtime.api.common import WatermarkStrategy
    from runtime.api.connectors.generator import DataGeneratorSource

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    numbers = env.from_source(DataGeneratorSource(lambda i: i, 10**9, batch_size=100), WatermarkStrategy.no_watermarks(), "numbers")
    numbers.key_by(lambda x: x % 7).map(lambda x: x + 1).name("keyed map").rebalance().map(lambda x: x).name("tail").print()
    client = cluster.submit(env.get_job_graph(f"cancel-all-{attempt}"))
    wait_until(lambda: client.get_job_status() is JobStatus.RUNNING, timeout=30, what="the job runs", interval=0.05)
    wait_for_all_subtasks(cluster, client.job_id, timeout=30)
    # records flow through to the last vertex: every channel carries data when the cancel comes
    wait_until(
        lambda: all(s.metrics.records_in > 0 for s in job_details(cluster, client.job_id).vertices[-1].subtasks),
        timeout=30, what="records reaching every subtask of 'tail'", interval=0.05,
    )
    client.cancel()
    with pytest.raises(JobExecutionError):
        client.get_job_execution_result(timeout=30)
    final = job_details(cluster, client.job_id)
    assert final.status is JobStatus.CANCELED
    states = {(v.name, s.subtask_index): s.state for v in final.vertices for s in v.subtasks}
    assert set(states.values()) == {ExecutionState.CANCELED}, states


def test_cancel_ends_every_subtask_canceled_not_failed(shared_cluster: MiniCluster) -> None:
    """A consumer whose producer was canceled (its partition released) before its own cancel
    arrived is canceled too (Flink: CancelTaskException), not FAILED under a CANCELED job."""
    for attempt in range(3):
        _cancel_while_records_flow(shared_cluster, attempt)
