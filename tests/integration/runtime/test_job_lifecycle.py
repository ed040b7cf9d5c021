"""Job lifecycle edges: cancel during the final commit, coordinators that cannot start, no leaks per job."""
from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from runtime.api.connectors.base import Sink
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.operators.base import StreamOperator
from runtime.core.errors import JobExecutionError
from runtime.core.records import RecordBatch
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.waiting import wait_until


class _Discard(StreamOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        pass


class SlowCommitCoordinator:
    def __init__(self) -> None:
        self.closed_during_commit = False
        self._committing = False

    def start(self) -> None:
        pass

    def handle_event_from_operator(self, subtask: int, attempt: int, event: Any) -> None:
        pass

    def on_job_finished(self) -> dict[str, Any]:
        self._committing = True
        time.sleep(1.5)  # a slow commit
        self._committing = False
        return {"committed": not self.closed_during_commit}

    def close(self) -> None:
        if self._committing:
            self.closed_during_commit = True


class SlowCommitProvider:
    def create(self, job_id: str, operator_name: str, parallelism: int) -> SlowCommitCoordinator:
        return SlowCommitCoordinator()


class SlowCommitSink(Sink):
    def create_writer(self) -> StreamOperator:
        return _Discard()

    def coordinator_provider(self) -> SlowCommitProvider:
        return SlowCommitProvider()


class BrokenProvider:
    def create(self, job_id: str, operator_name: str, parallelism: int) -> Any:
        raise RuntimeError("the commit service is unreachable")


class BrokenCoordinatorSink(SlowCommitSink):
    def coordinator_provider(self) -> BrokenProvider:  # type: ignore[override]
        return BrokenProvider()


def test_cancel_during_the_final_commit_is_refused_and_the_job_finishes(cluster_env: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(list(range(10))).sink_to(SlowCommitSink()).name("slow commit")
    client = cluster_env.submit(env.get_job_graph("commit-window"))
    deadline = time.monotonic() + 30
    entry = cluster_env.dispatcher.jobs[client.job_id]
    while not entry.job_master.scheduler.finishing:
        assert time.monotonic() < deadline and entry.result is None
        time.sleep(0.01)
    client.cancel()  # arrives while the commit runs
    result = client.get_job_execution_result(timeout=30)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["committed"] is True  # nothing closed the coordinator under its commit


def test_coordinator_that_cannot_start_fails_the_job_promptly(cluster_env: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3]).sink_to(BrokenCoordinatorSink()).name("broken sink")
    t0 = time.monotonic()
    with pytest.raises(JobExecutionError) as info:
        from runtime.api.execution import use_executor

        with use_executor(cluster_env.executor()):
            env.execute("broken-coordinator")
    assert time.monotonic() - t0 < 10
    assert "the commit service is unreachable" in str(info.value)
    assert "broken sink" in str(info.value)


def test_finished_jobs_leak_no_threads_or_file_descriptors(cluster_env: MiniCluster) -> None:
    def run_one() -> None:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.from_collection([1, 2, 3]).map(lambda x: x + 1).print()
        cluster_env.submit(env.get_job_graph("tiny")).get_job_execution_result(timeout=30)

    run_one()  # warm: TaskManagers registered, pools created
    time.sleep(0.5)
    threads, fds = threading.active_count(), len(os.listdir("/proc/self/fd"))
    for _ in range(8):
        run_one()
    time.sleep(1.0)  # JobMasters stop off the dispatcher loop
    assert threading.active_count() <= threads + 2, [t.name for t in threading.enumerate()]
    assert len(os.listdir("/proc/self/fd")) <= fds + 4


def test_task_stuck_in_user_code_does_not_keep_the_job_cancelling(mini_cluster: MiniCluster) -> None:
    from runtime.api.common import Configuration

    conf = Configuration()
    conf.set_string("task.cancellation.timeout.s", "2")
    env = StreamExecutionEnvironment.get_execution_environment(conf)

    def stuck(x: int) -> int:
        time.sleep(3600)  # ignores cancellation
        return x

    env.from_collection([1, 2, 3]).map(stuck).name("stuck map").print()
    client = mini_cluster.submit(env.get_job_graph("stuck"))
    mini_cluster.wait_for_task_managers(1, timeout=30)
    deadline = time.monotonic() + 30
    while any(t.slots_free for t in mini_cluster.task_managers()) or client.get_job_status() is not JobStatus.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    t0 = time.monotonic()
    client.cancel()
    with pytest.raises(JobExecutionError):
        client.get_job_execution_result(timeout=30)
    assert client.get_job_status() is JobStatus.CANCELED
    assert time.monotonic() - t0 < 8  # the 2 s watchdog, the process exit, the loss report


def test_cancel_interrupts_user_code_busy_with_a_batch_and_keeps_the_task_manager(mini_cluster: MiniCluster) -> None:
    """A map that takes a minute over its batch stops soon after cancel (Flink's TaskInterrupter);
    the TaskManager is not given up and its slot serves the next job."""
    from runtime.api.common import Configuration

    conf = Configuration()
    conf.set_string("task.cancellation.timeout.s", "20")  # the watchdog must not be what ends it
    env = StreamExecutionEnvironment.get_execution_environment(conf)

    def busy(x: int) -> int:
        time.sleep(0.05)  # 1200 records in one batch: a minute of user code
        return x

    env.from_collection(list(range(1200))).map(busy).name("busy map").print()
    client = mini_cluster.submit(env.get_job_graph("busy"))
    (tm,) = mini_cluster.wait_for_task_managers(1, timeout=30)
    deadline = time.monotonic() + 30
    while any(t.slots_free for t in mini_cluster.task_managers()) or client.get_job_status() is not JobStatus.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
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


def test_cancel_ends_every_subtask_canceled_not_failed(shared_cluster: MiniCluster) -> None:
    """A consumer whose producer was canceled (its partition released) before its own cancel
    arrived is canceled too (Flink: CancelTaskException), not FAILED under a CANCELED job."""
    from runtime.api.common import WatermarkStrategy
    from runtime.api.connectors.generator import DataGeneratorSource
    from runtime.rpc import messages as m

    for attempt in range(3):
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        numbers = env.from_source(DataGeneratorSource(lambda i: i, 10**9, batch_size=100), WatermarkStrategy.no_watermarks(), "numbers")
        numbers.key_by(lambda x: x % 7).map(lambda x: x + 1).name("keyed map").rebalance().map(lambda x: x).name("tail").print()
        client = shared_cluster.submit(env.get_job_graph(f"cancel-all-{attempt}"))
        wait_until(lambda: client.get_job_status() is JobStatus.RUNNING, timeout=30, what="the job runs", interval=0.05)
        details = lambda: shared_cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=client.job_id))  # noqa: E731
        wait_until(
            lambda: all(s.state is ExecutionState.RUNNING for v in details().vertices for s in v.subtasks),
            timeout=30, what="every subtask runs", interval=0.05,
        )
        time.sleep(0.3)
        client.cancel()
        with pytest.raises(JobExecutionError):
            client.get_job_execution_result(timeout=30)
        final = details()
        assert final.status is JobStatus.CANCELED
        states = {(v.name, s.subtask_index): s.state for v in final.vertices for s in v.subtasks}
        assert set(states.values()) == {ExecutionState.CANCELED}, states
