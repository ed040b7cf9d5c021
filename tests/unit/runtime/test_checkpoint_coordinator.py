"""CheckpointCoordinator: trigger, acknowledge, complete once, decline/timeout discard files, ids grow."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from runtime.core.states import ExecutionState
from runtime.jobmanager.checkpoint.config import CheckpointCoordinatorConfiguration
from runtime.jobmanager.checkpoint.coordinator import CheckpointCoordinator, CheckpointTask
from runtime.rpc import messages as m
from runtime.storage.checkpoint_store import CheckpointMetadata
from tests.waiting import wait_until


@dataclass
class TestingCheckpointStore:
    """In memory; `add` may be replaced to fail."""

    __test__ = False

    table_uri: str = "memory://checkpoints"
    added: list[CheckpointMetadata] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    swept_up_to: list[int] = field(default_factory=list)  # empty folders of failed checkpoints removed up to
    removed_uncommitted_up_to: list[int] = field(default_factory=list)  # at the job's end
    add_fn: Callable[[CheckpointMetadata], int] | None = None

    def metadata_for(self, pending: Any, now: float) -> CheckpointMetadata:
        from runtime.jobmanager.checkpoint.store import CompletedCheckpointStore

        return CompletedCheckpointStore.metadata_for(self, pending, now)  # type: ignore[arg-type]  # the real method, on this double

    job_id = "job"

    def add(self, metadata: CheckpointMetadata) -> int:
        if self.add_fn is not None:
            return self.add_fn(metadata)
        self.added.append(metadata)
        return len(self.added)

    def latest(self) -> CheckpointMetadata | None:
        return self.added[-1] if self.added else None

    def discard(self, files: list[str], checkpoint_id: int | None = None) -> None:
        self.discarded.extend(files)
        if checkpoint_id is not None:
            self.swept_up_to.append(checkpoint_id)

    def remove_uncommitted(self, up_to: int) -> None:
        self.removed_uncommitted_up_to.append(up_to)


class FakeTimers:
    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[list[Any]] = []

    def call_later(self, delay: float, cb: Callable[[], None]) -> Any:
        entry = [self.now + delay, cb, False]
        self.timers.append(entry)

        class Handle:
            def cancel(self_inner) -> None:
                entry[2] = True

        return Handle()

    def advance(self, seconds: float) -> None:
        self.now += seconds
        due = [t for t in self.timers if t[0] <= self.now and not t[2]]
        self.timers = [t for t in self.timers if t not in due]
        for t in due:
            t[1]()


@dataclass
class TestingCheckpointHost:
    __test__ = False
    timers: FakeTimers
    tasks: list[CheckpointTask]
    triggered: list[tuple[str, int]] = field(default_factory=list)
    notified: list[tuple[str, int, bool]] = field(default_factory=list)
    completed: list[int] = field(default_factory=list)
    failures_exceeded: list[m.ErrorInfo] = field(default_factory=list)
    running: Callable[[], list[CheckpointTask] | str] | None = None
    spawned: list[Any] = field(default_factory=list)
    final: Callable[[list[CheckpointTask]], dict[str, dict[int, bytes]]] = lambda finished: {}

    def checkpoint_tasks(self) -> list[CheckpointTask] | str:
        return self.running() if self.running else list(self.tasks)

    def final_committables(self, finished: list[CheckpointTask]) -> dict[str, dict[int, bytes]]:
        return self.final(finished)

    async def snapshot_coordinators(self, checkpoint_id: int) -> dict[str, bytes]:
        return {}

    def tasks_triggered(self, checkpoint_id: int) -> None:
        pass

    async def send_trigger(self, task: CheckpointTask, msg: m.TriggerCheckpoint) -> None:
        self.triggered.append((task.attempt_id, msg.checkpoint_id))

    async def send_notify(self, task: CheckpointTask, msg: m.NotifyCheckpoint) -> None:
        self.notified.append((task.attempt_id, msg.checkpoint_id, msg.completed))

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Any:
        return self.timers.call_later(delay_s, callback)

    def spawn(self, coro: Any) -> Any:
        task = asyncio.get_event_loop().create_task(coro)
        self.spawned.append(task)
        return task

    async def on_checkpoint_completed(self, checkpoint: Any) -> None:
        self.completed.append(checkpoint.checkpoint_id)

    def on_checkpoint_failures_exceeded(self, error: m.ErrorInfo) -> None:
        self.failures_exceeded.append(error)


TASKS = [
    CheckpointTask("src-0", "tm-1", "v-src", 0, 2, ("source",), True),
    CheckpointTask("src-1", "tm-2", "v-src", 1, 2, ("source",), True),
    CheckpointTask("sink-0", "tm-1", "v-sink", 0, 1, ("sink",), False, upstream=(("v-src", 0), ("v-src", 1))),
]


def ack(attempt: str, cid: int, files: list[str] = (), committables: dict[str, bytes] | None = None) -> m.AcknowledgeCheckpoint:
    handles = [m.StateFileHandle(path=p, size=10, rows=1, operator_ids=["source" if attempt.startswith("src") else "sink"]) for p in files]
    return m.AcknowledgeCheckpoint(
        job_id="job", execution_attempt_id=attempt, checkpoint_id=cid,
        state=m.TaskStateSnapshot(files=handles, committables=committables or {}),
    )


@pytest.fixture
def setup():
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    timers = FakeTimers()
    host = TestingCheckpointHost(timers, TASKS)
    store = TestingCheckpointStore()
    cfg = CheckpointCoordinatorConfiguration(interval_ms=500, timeout_ms=2000, table_uri="memory://checkpoints", tolerable_failures=1)
    cc = CheckpointCoordinator("job", cfg, store, host, clock=lambda: timers.now)

    def run(coro: Any) -> Any:
        out = loop.run_until_complete(coro)
        loop.run_until_complete(asyncio.sleep(0))
        while host.spawned:
            pending, host.spawned = host.spawned, []
            loop.run_until_complete(asyncio.gather(*pending))
        return out

    yield cc, host, store, timers, run
    cc.shutdown()
    loop.close()


def test_triggers_sources_only_and_completes_once_with_every_acknowledgement(setup) -> None:
    cc, host, store, _, run = setup
    cid = run(cc.trigger_checkpoint())
    assert cid == 1
    assert sorted(host.triggered) == [("src-0", 1), ("src-1", 1)]
    run(cc.receive_acknowledge(ack("src-0", 1, ["a.parquet"])))
    run(cc.receive_acknowledge(ack("src-1", 1, ["b.parquet"])))
    assert not store.added and cc.pending is not None
    run(cc.receive_acknowledge(ack("sink-0", 1, [], {"sink": b"x"})))
    run(cc.receive_acknowledge(ack("sink-0", 1)))  # a duplicate changes nothing
    assert [c.checkpoint_id for c in store.added] == [1]
    meta = store.added[0]
    assert meta.operator_files == {"source": ["a.parquet", "b.parquet"]}
    assert meta.committables == {"sink": [b"x"]}
    assert host.completed == [1]
    assert sorted(n for n in host.notified) == [("sink-0", 1, True), ("src-0", 1, True), ("src-1", 1, True)]


def test_one_at_a_time_and_ids_only_grow(setup) -> None:
    cc, host, store, _, run = setup
    assert run(cc.trigger_checkpoint()) == 1
    assert run(cc.trigger_checkpoint()) is None  # one pending already
    run(cc.receive_decline(m.DeclineCheckpoint(job_id="job", execution_attempt_id="src-0", checkpoint_id=1, reason="no")))
    assert run(cc.trigger_checkpoint()) == 2


def test_a_decline_discards_the_files_of_the_acknowledgements_received(setup) -> None:
    cc, host, store, _, run = setup
    run(cc.trigger_checkpoint())
    run(cc.receive_acknowledge(ack("src-0", 1, ["a.parquet"])))
    run(cc.receive_decline(m.DeclineCheckpoint(job_id="job", execution_attempt_id="src-1", checkpoint_id=1, reason="disk full")))
    assert store.discarded == ["a.parquet"] and not store.added
    assert store.swept_up_to == [1]  # the folder of a task whose write failed (nothing to list) goes too
    assert ("src-0", 1, False) in host.notified
    # a late acknowledgement of the aborted checkpoint: its files are deleted too, nothing completes
    run(cc.receive_acknowledge(ack("src-1", 1, ["late.parquet"])))
    assert "late.parquet" in store.discarded and not store.added
    stats = cc.stats.snapshot()
    assert stats.counts.failed == 1 and "disk full" in (stats.latest_failed.failure_message or "")


def test_shutdown_removes_what_checkpoints_that_never_completed_left(setup) -> None:
    """At the job's end no task writes any more: the folders of every uncommitted checkpoint go (a
    killed writer's temp file, a write that failed after its checkpoint was given up)."""
    cc, _host, store, _, run = setup
    run(cc.trigger_checkpoint())
    run(cc.receive_decline(m.DeclineCheckpoint(job_id="job", execution_attempt_id="src-1", checkpoint_id=1, reason="disk full")))
    run(cc.trigger_checkpoint())
    cc.shutdown()
    cc._io.shutdown(wait=True)
    assert store.removed_uncommitted_up_to == [2]


def test_acknowledgements_completing_a_checkpoint_after_the_job_ended_commit_nothing(setup) -> None:
    """A cancelled job's last acknowledgements may arrive after its coordinator shut down: the checkpoint
    is not completed (its sinks would commit after the job ended), and its files are deleted."""
    cc, host, store, _, run = setup
    run(cc.trigger_checkpoint())
    run(cc.receive_acknowledge(ack("src-0", 1, ["a.parquet"])))
    run(cc.receive_acknowledge(ack("src-1", 1, ["b.parquet"])))
    cc.shutdown()
    run(cc.receive_acknowledge(ack("sink-0", 1, ["c.parquet"], {"sink": b"x"})))
    wait_until(lambda: len(store.discarded) == 3, timeout=5, what="the three files deleted", interval=0.01)
    assert not store.added and not host.completed
    assert sorted(store.discarded) == ["a.parquet", "b.parquet", "c.parquet"]


def test_a_timeout_discards_and_too_many_failures_in_a_row_are_reported(setup) -> None:
    cc, host, store, timers, run = setup
    run(cc.trigger_checkpoint())
    run(cc.receive_acknowledge(ack("src-0", 1, ["a.parquet"])))
    timers.advance(2.5)
    run(asyncio.sleep(0))
    assert store.discarded == ["a.parquet"] and cc.pending is None
    assert not host.failures_exceeded  # 1 tolerated
    run(cc.trigger_checkpoint())
    timers.advance(2.5)
    run(asyncio.sleep(0))
    assert len(host.failures_exceeded) == 1
    assert "tolerable failure threshold" in host.failures_exceeded[0].message


def test_a_failed_commit_means_no_checkpoint(setup) -> None:
    cc, host, store, _, run = setup

    def broken(meta: CheckpointMetadata) -> int:
        raise OSError("no space left on device")

    store.add_fn = broken
    run(cc.trigger_checkpoint())
    for t in TASKS:
        run(cc.receive_acknowledge(ack(t.attempt_id, 1, [f"{t.attempt_id}.parquet"])))
    assert host.completed == [] and cc.latest_completed is None
    assert sorted(store.discarded) == ["sink-0.parquet", "src-0.parquet", "src-1.parquet"]


def test_skipped_while_not_every_task_runs_and_restore_continues_the_ids(setup) -> None:
    cc, host, store, _, run = setup
    host.running = lambda: "not every task is running"
    assert run(cc.trigger_checkpoint()) is None
    host.running = None
    store.added.append(CheckpointMetadata(job_id="job", checkpoint_id=41, timestamp_ms=0, files=[], operator_files={}, committables={}))
    latest = run(cc.latest_for_restore())
    assert latest.checkpoint_id == 41
    assert run(cc.trigger_checkpoint()) == 42


def test_a_failover_while_the_commit_is_in_flight_never_deletes_the_files_it_references(setup) -> None:
    import threading

    cc, host, store, _, run = setup
    gate = threading.Event()

    def slow_add(meta: CheckpointMetadata) -> int:
        gate.wait(5)
        store.added.append(meta)
        return 1

    store.add_fn = slow_add
    run(cc.trigger_checkpoint())
    for t in TASKS[:-1]:
        run(cc.receive_acknowledge(ack(t.attempt_id, 1, [f"{t.attempt_id}.parquet"])))
    loop = asyncio.get_event_loop()
    completing = loop.create_task(cc.receive_acknowledge(ack("sink-0", 1, ["sink-0.parquet"])))
    loop.run_until_complete(asyncio.sleep(0.05))
    run(cc.abort_pending("a failover is in progress"))  # arrives while the Delta commit runs
    assert store.discarded == []
    gate.set()
    loop.run_until_complete(completing)
    assert cc.latest_completed.checkpoint_id == 1 and store.discarded == []


def test_declines_that_say_nothing_about_checkpointing_are_not_counted(setup) -> None:
    cc, host, store, _, run = setup
    for cid in (1, 2, 3):
        run(cc.trigger_checkpoint())
        run(cc.receive_decline(m.DeclineCheckpoint(
            job_id="job", execution_attempt_id="src-0", checkpoint_id=cid, reason="task is no longer running", counts_as_failure=False
        )))
    assert not host.failures_exceeded and cc.stats.snapshot().counts.failed == 3


def test_a_finished_source_is_skipped_recorded_and_its_coordinators_final_committables_are_held(setup) -> None:
    """FLIP-147: src-1 finished; src-0 is triggered, src-1 neither triggered nor waited for, and the
    checkpoint records it finished with what the operator coordinators hold for it."""
    import dataclasses

    cc, host, store, _, run = setup
    host.tasks = [dataclasses.replace(TASKS[1], state=ExecutionState.FINISHED) if t is TASKS[1] else t for t in TASKS]
    host.final = lambda finished: {"sink": {t.subtask_index: b"final" for t in finished}}
    assert run(cc.trigger_checkpoint()) == 1
    assert host.triggered == [("src-0", 1)]
    run(cc.receive_acknowledge(ack("src-0", 1, ["a.parquet"])))
    run(cc.receive_acknowledge(ack("sink-0", 1, [])))
    meta = store.added[0]
    assert meta.finished_subtasks == {"source": [1]}
    assert meta.parallelism["source"] == 2
    assert sorted(n for n in host.notified) == [("sink-0", 1, True), ("src-0", 1, True)]


def test_the_sink_is_triggered_once_every_source_finished_and_nothing_once_all_did(setup) -> None:
    import dataclasses

    cc, host, store, _, run = setup
    sources_done = [dataclasses.replace(t, state=ExecutionState.FINISHED) if t.is_source else t for t in TASKS]
    host.tasks = sources_done
    assert run(cc.trigger_checkpoint()) == 1
    assert host.triggered == [("sink-0", 1)]
    run(cc.receive_acknowledge(ack("sink-0", 1, [])))
    assert store.added[0].finished_subtasks == {"source": [0, 1]}
    host.tasks = [dataclasses.replace(t, state=ExecutionState.FINISHED) for t in TASKS]
    assert run(cc.trigger_checkpoint()) is None


def test_with_checkpoints_after_tasks_finish_off_a_finished_task_stops_checkpoints(setup) -> None:
    import dataclasses

    cc, host, store, _, run = setup
    cc.config = cc.config.model_copy(update={"checkpoints_after_tasks_finish": False})
    host.tasks = [dataclasses.replace(TASKS[1], state=ExecutionState.FINISHED) if t is TASKS[1] else t for t in TASKS]
    assert run(cc.trigger_checkpoint()) is None and host.triggered == []


def test_settle_waits_for_a_checkpoint_whose_commit_is_in_flight(setup) -> None:
    """A job finishing while a checkpoint completes (FLIP-147 keeps checkpointing after tasks
    finished) makes its final commit only once that checkpoint and its sink commits are done."""
    import threading

    cc, host, store, _, run = setup
    gate = threading.Event()

    def slow_add(meta: CheckpointMetadata) -> int:
        gate.wait(5)
        store.added.append(meta)
        return 1

    store.add_fn = slow_add
    run(cc.trigger_checkpoint())
    for t in TASKS[:-1]:
        run(cc.receive_acknowledge(ack(t.attempt_id, 1)))
    loop = asyncio.get_event_loop()
    completing = loop.create_task(cc.receive_acknowledge(ack("sink-0", 1)))
    loop.run_until_complete(asyncio.sleep(0.05))
    settled = loop.create_task(cc.settle())
    loop.run_until_complete(asyncio.sleep(0.05))
    assert not settled.done() and host.completed == []
    gate.set()
    loop.run_until_complete(settled)
    assert host.completed == [1]
    loop.run_until_complete(completing)
    run(cc.settle())  # nothing in flight: returns at once


def test_a_jobmanager_that_no_longer_leads_commits_no_checkpoint_and_counts_no_failure(setup) -> None:
    """High availability: the fence is asked right before the Delta commit; a JobManager that lost its
    leadership (a paused leader resumed, split brain) commits nothing, and its sinks hear of nothing."""
    cc, host, store, _, run = setup
    leading = [True]
    asked: list[int] = []

    def fence() -> bool:
        asked.append(len(store.added))
        return leading[0]

    cc.fence = fence
    run(cc.trigger_checkpoint())
    for t in TASKS:
        run(cc.receive_acknowledge(ack(t.attempt_id, 1, [f"{t.attempt_id}-1.parquet"])))
    assert [c.checkpoint_id for c in store.added] == [1] and asked == [0]
    leading[0] = False
    run(cc.trigger_checkpoint())
    for t in TASKS:
        run(cc.receive_acknowledge(ack(t.attempt_id, 2, [f"{t.attempt_id}-2.parquet"])))
    assert [c.checkpoint_id for c in store.added] == [1] and host.completed == [1]
    assert sorted(store.discarded) == ["sink-0-2.parquet", "src-0-2.parquet", "src-1-2.parquet"]
    assert cc.stats.snapshot().counts.failed == 1 and not host.failures_exceeded


def test_suspend_deletes_nothing_the_new_leader_may_restore(setup) -> None:
    """Leadership lost: unlike shutdown, suspend sweeps no uncommitted folder and commits nothing more."""
    cc, host, store, _, run = setup
    run(cc.trigger_checkpoint())
    run(cc.receive_acknowledge(ack("src-0", 1, ["a.parquet"])))
    cc.suspend()
    cc._io.shutdown(wait=True)
    assert store.removed_uncommitted_up_to == [] and store.discarded == [] and not store.added
