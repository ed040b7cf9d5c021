"""The default scheduler against a fake SchedulerHost: no RPC service, no TaskManagers, no Spark.

The fake host records what the scheduler asks of the JobMaster (slot declarations, task submissions
and cancellations) and the tests play the TaskManagers' part by reporting task states back.
"""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import cloudpickle
import pytest

from runtime.core.errors import ThrowableType
from runtime.core.operators import OperatorCoordinator, OperatorCoordinatorContext
from runtime.core.states import ExecutionState, JobStatus
from runtime.graph.execution_graph import ExecutionVertexID
from runtime.graph.job_graph import DistributionPattern as DP
from runtime.graph.job_graph import JobGraph, JobType
from runtime.graph.job_graph import ResultPartitionType as RT
from runtime.jobmanager.scheduler.default import DefaultScheduler
from runtime.jobmanager.scheduler.ng import SchedulerHost, create_scheduler
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc import messages as m
from runtime.rpc.deployment import DataAddress
from tests.graph_builders import hand_made_job_graph

pytestmark = pytest.mark.unit


class FakeTaskExecutor:
    def __init__(self, host: FakeHost, tm_id: str) -> None:
        self.host, self.tm_id = host, tm_id

    async def submit_task(self, tdd: Any, timeout: float = 0) -> m.Ack:
        self.host.submitted.append(tdd)
        return m.Ack()

    async def cancel_task(self, msg: m.CancelTask, timeout: float = 0) -> m.Ack:
        self.host.cancelled.append(msg.execution_attempt_id)
        return m.Ack(ok=False)  # "not here any more": the attempt counts as CANCELED at once


class FakeResourceManager:
    def __init__(self) -> None:
        self.declared: list[int] = []

    async def declare_required_resources(self, msg: m.ResourceRequirements, timeout: float = 0) -> m.Ack:
        self.declared.append(sum(r.count for r in msg.requirements))
        return m.Ack()

    async def resource_status(self, msg: m.Empty, timeout: float = 0) -> m.ResourceStatus:
        return m.ResourceStatus()


class FakeHost:
    """A SchedulerHost without an RPC service: a private loop, recorded calls."""

    endpoint_id = "jobmaster-fake"

    def __init__(self, job_id: str) -> None:
        self.slot_pool = SlotPool(job_id)
        self._loop = asyncio.new_event_loop()
        self._rm = FakeResourceManager()
        self.submitted: list[Any] = []
        self.cancelled: list[str] = []
        self.statuses: list[JobStatus] = []
        self.results: list[m.JobResultMessage] = []

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def rm(self) -> Any:
        return self._rm

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        return asyncio.ensure_future(coro, loop=self._loop)

    def task_executor(self, tm_id: str) -> Any:
        return FakeTaskExecutor(self, tm_id)

    def status_changed(self, status: JobStatus, cause: str | None) -> None:
        self.statuses.append(status)

    def job_reached_terminal(self, result: m.JobResultMessage) -> None:
        self.results.append(result)

    async def release_resources(self) -> None:
        pass

    recovered = False
    fencing_token = None
    leading = True  # what confirm_leadership answers (the commit fence)

    def confirm_leadership(self) -> bool:
        return self.leading

    def settle(self) -> None:
        """Run the loop until nothing is ready to run (the main thread going idle)."""
        for _ in range(50):
            self._loop.run_until_complete(asyncio.sleep(0.005))

    def close(self) -> None:
        for task in asyncio.all_tasks(self._loop):
            task.cancel()
        self._loop.run_until_complete(asyncio.sleep(0))
        self._loop.close()


def offer_slots(host: FakeHost, n: int) -> None:
    for i in range(n):
        tm = f"tm-{i % 2}"
        host.slot_pool.offer(PhysicalSlot(f"alloc-{i}", tm, i, DataAddress(tm_id=tm, host="127.0.0.1", port=1)))


def report(s: DefaultScheduler, tdd: Any, state: ExecutionState, error: m.ErrorInfo | None = None) -> m.Ack:
    return s.update_task_execution_state(m.TaskExecutionStateUpdate(
        job_id=s.job_id, execution_attempt_id=tdd.execution_attempt_id, state=state, error=error,
    ))


def _graph(job_type: JobType = JobType.STREAMING, **config: str) -> JobGraph:
    jg = hand_made_job_graph([("A", 2), ("B", 2)], [("A", "B", DP.POINTWISE, RT.PIPELINED_BOUNDED)])
    return jg.model_copy(update={"job_type": job_type, "config": {"restart-strategy.type": "fixed-delay",
                                                                   "restart-strategy.fixed-delay.attempts": "3",
                                                                   "restart-strategy.fixed-delay.delay": "0 ms", **config}})


@pytest.fixture
def host() -> Any:
    h = FakeHost("job")
    yield h
    h.close()


def started(host: FakeHost, jg: JobGraph, slots: int) -> DefaultScheduler:
    s = create_scheduler(host, jg)
    assert isinstance(s, DefaultScheduler)
    host.loop.run_until_complete(s.start())
    offer_slots(host, slots)
    s.on_slots_offered()
    host.settle()
    return s


def test_the_fake_host_is_a_scheduler_host(host: FakeHost) -> None:
    typed: SchedulerHost = host  # mypy checks the Protocol here; the runtime check is the scheduler using it
    assert typed.endpoint_id == "jobmaster-fake"


def test_a_job_is_declared_deployed_and_finished_through_its_host(host: FakeHost) -> None:
    s = started(host, _graph(), slots=2)
    assert s.status.state is JobStatus.RUNNING and host.rm.declared == [2]
    assert len(host.submitted) == 4  # A and B, two subtasks each, sharing two slots
    for tdd in host.submitted:
        report(s, tdd, ExecutionState.INITIALIZING)
        report(s, tdd, ExecutionState.RUNNING)
    for tdd in host.submitted:
        report(s, tdd, ExecutionState.FINISHED)
    host.settle()
    assert host.statuses[-1] is JobStatus.FINISHED
    assert [r.status for r in host.results] == [JobStatus.FINISHED]
    assert s.job_details().status is JobStatus.FINISHED


def test_a_failed_task_restarts_its_region_only(host: FakeHost) -> None:
    s = started(host, _graph(), slots=2)
    by_vertex = {(t.job_vertex_id, t.subtask_index): t for t in host.submitted}
    for tdd in host.submitted:
        report(s, tdd, ExecutionState.RUNNING)
    report(s, by_vertex[("B", 1)], ExecutionState.FAILED, m.ErrorInfo(type_name="ValueError", message="record 7"))
    host.settle()
    # region (A1, B1) restarts: A1 was cancelled, both get new attempts; region (A0, B0) runs on
    assert host.cancelled == [by_vertex[("A", 1)].execution_attempt_id]
    resubmitted = {(t.job_vertex_id, t.subtask_index) for t in host.submitted[4:]}
    assert resubmitted == {("A", 1), ("B", 1)}
    assert s.status.state is JobStatus.RUNNING and s.num_restarts == 1
    entry = s.exceptions().entries[0]
    assert (entry.error.message, entry.restarted_tasks, entry.global_failure) == ("record 7", 2, False)


def test_a_non_recoverable_failure_fails_the_job_without_a_restart(host: FakeHost) -> None:
    s = started(host, _graph(), slots=2)
    for tdd in host.submitted:
        report(s, tdd, ExecutionState.RUNNING)
    damaged = m.ErrorInfo(type_name="CorruptStateError", message="state file x is truncated", throwable_type=ThrowableType.NON_RECOVERABLE_ERROR)
    report(s, host.submitted[0], ExecutionState.FAILED, damaged)
    host.settle()
    assert s.status.state is JobStatus.FAILED and s.num_restarts == 0
    assert "non-recoverable" in s.failure.message


def test_a_lost_blocking_partition_makes_its_producer_run_again(host: FakeHost) -> None:
    # A =blocking=> B (batch): A finished and its partitions are committed; B cannot read A's
    # partition 0 (its files are gone). Before the failure handler passed the cause to the failover
    # strategy, only B's region restarted and read the same missing files until restarts ran out.
    jg = hand_made_job_graph([("A", 2), ("B", 2)], [("A", "B", DP.POINTWISE, RT.BLOCKING)])
    jg = jg.model_copy(update={"job_type": JobType.BATCH, "config": {"restart-strategy.type": "fixed-delay",
                                                                   "restart-strategy.fixed-delay.attempts": "3",
                                                                   "restart-strategy.fixed-delay.delay": "0 ms"}})
    s = started(host, jg, slots=2)
    assert s.partitions is not None
    producers = {t.subtask_index: t for t in host.submitted if t.job_vertex_id == "A"}
    for tdd in producers.values():
        report(s, tdd, ExecutionState.RUNNING)
        report(s, tdd, ExecutionState.FINISHED)
    for i in (0, 1):  # the tracker's commit (Delta I/O) is not this test's subject: record it as done
        produced = m.ProducedBlockingPartition(partition_id=f"A->B:{i}", dataset_id="A->B", files=[], bytes=0)
        s.partitions.mark_committed(produced, producers[i].execution_attempt_id)
    s._schedule(s.strategy.on_partitions_committed(["A->B:0", "A->B:1"]))
    host.settle()
    consumers = {t.subtask_index: t for t in host.submitted if t.job_vertex_id == "B"}
    assert set(consumers) == {0, 1}
    report(s, consumers[0], ExecutionState.RUNNING)
    lost = m.ErrorInfo(type_name="BlockingPartitionMissingError", message="blocking partition A->B:0 cannot be read",
                       throwable_type=ThrowableType.PARTITION_DATA_MISSING_ERROR, partition_id="A->B:0")
    report(s, consumers[0], ExecutionState.FAILED, lost)
    host.settle()
    again = [(t.job_vertex_id, t.subtask_index) for t in host.submitted[len(producers) + len(consumers):]]
    assert again == [("A", 0)], "the producer of the lost partition runs again first"
    assert not s.partitions.is_committed("A->B:0") and s.partitions.is_committed("A->B:1")
    assert s.eg.vertex(ExecutionVertexID("B", 0)).execution_state is ExecutionState.CREATED  # waits for A0's new commit
    assert s.status.state is JobStatus.RUNNING


def test_the_scheduler_is_chosen_by_its_key_and_batch_keeps_the_default(host: FakeHost) -> None:
    from runtime.jobmanager.scheduler.adaptive.scheduler import AdaptiveScheduler

    assert isinstance(create_scheduler(host, _graph()), DefaultScheduler)
    adaptive = create_scheduler(host, _graph(**{"jobmanager.scheduler": "adaptive"}))
    assert isinstance(adaptive, AdaptiveScheduler) and not adaptive.reactive
    reactive = create_scheduler(host, _graph(**{"scheduler-mode": "reactive"}))
    assert isinstance(reactive, AdaptiveScheduler) and reactive.reactive
    batch = create_scheduler(host, _graph(JobType.BATCH, **{"jobmanager.scheduler": "adaptive"}))
    assert isinstance(batch, DefaultScheduler)  # batch jobs keep the default scheduler, as in Flink


class Recording(OperatorCoordinator):
    """Overrides two hooks only: the holder calls the others' no-op defaults without probing."""

    seen: list[tuple[str, Any]] = []

    def handle_event_from_operator(self, subtask: int, attempt: int, event: Any) -> None:
        Recording.seen.append(("event", (subtask, attempt, event, self.parallelism)))
        if event == "fail":
            self.context.fail_job(RuntimeError("the coordinator gave up"))

    def reset_to_checkpoint(self, checkpoint_id: int | None, committables: list[Any], subtasks: set[int] | None = None) -> None:
        Recording.seen.append(("reset", (checkpoint_id, sorted(subtasks or ()))))


class RecordingProvider:
    def create(self, context: OperatorCoordinatorContext) -> OperatorCoordinator:
        return Recording(context)


def test_a_coordinator_knows_its_parallelism_and_can_fail_the_job(host: FakeHost) -> None:
    jg = _graph()
    jg.vertices[1].operators[0].coordinator_provider = cloudpickle.dumps(RecordingProvider())
    Recording.seen = []
    s = started(host, jg, slots=2)
    for tdd in host.submitted:
        report(s, tdd, ExecutionState.RUNNING)
    node_id = jg.vertices[1].operators[0].node_id
    assert s.deliver_operator_event(node_id, 1, 0, "hello").ok
    s.deliver_operator_event(node_id, 0, 0, "fail")  # a global failover: every task restarts
    host.settle()
    assert Recording.seen[0] == ("event", (1, 0, "hello", 2))
    assert ("reset", (None, [0, 1])) in Recording.seen  # B's coordinator went back (no checkpoint: to scratch)
    assert s.num_restarts == 1 and len(host.submitted) == 8
    assert s.exceptions().entries[0].global_failure and s.exceptions().entries[0].error.operator == "B"


def test_termination_states_follow_their_table() -> None:
    from runtime.core.errors import IllegalStateTransitionError
    from runtime.jobmanager.scheduler.termination import Termination, termination_machine

    t = termination_machine("job")
    t.transition(Termination.FINAL_SAVEPOINT)
    t.transition(Termination.RUNNING)  # the final savepoint failed: the sources resume
    t.transition(Termination.STOPPING)
    with pytest.raises(IllegalStateTransitionError):
        t.transition(Termination.RUNNING)  # a stopping job never runs again
