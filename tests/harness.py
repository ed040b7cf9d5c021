"""One in-test harness that drives operators directly, no TaskManager, no network
(Flink: OneInputStreamOperatorTestHarness). Shared by the api, operators and state unit tests.

Test doubles, not mocks: a fake Output that records batches and watermarks in order, a fake
ProcessingTimeService whose clock the test advances (timer callbacks run synchronously, like on
the task thread), and a fake OperatorEventGateway that records events and can forward them to a
coordinator.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from runtime.api.operators.base import InputStatus, OperatorContext, Output, SourceOperator, StreamOperator
from runtime.core.keygroups import KeyGroupRange, compute_key_group_range_for_operator_index
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, ObjectBatch, RecordBatch, Watermark

if TYPE_CHECKING:
    from runtime.core.checkpoint import KeyedSnapshot, OperatorSnapshot

# every key group of the harness's default max parallelism (128); KeyGroupRange is frozen, so one default serves all
ALL_KEY_GROUPS = KeyGroupRange(0, 127)


class CollectingOutput:
    """Records what an operator emits: batches and watermarks, in order."""

    def __init__(self) -> None:
        self.events: list[RecordBatch | Watermark] = []
        self.side: dict[str, list[RecordBatch]] = {}  # side output tag -> its batches

    def emit(self, batch: RecordBatch) -> None:
        self.events.append(batch)

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        self.side.setdefault(tag, []).append(batch)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.events.append(watermark)

    @property
    def batches(self) -> list[RecordBatch]:
        return [e for e in self.events if not isinstance(e, Watermark)]

    @property
    def watermarks(self) -> list[int]:
        return [e.timestamp for e in self.events if isinstance(e, Watermark)]

    def records_with_timestamps(self) -> list[tuple[Any, int | None]]:
        """(value, timestamp) of every emitted record."""
        out: list[tuple[Any, int | None]] = []
        for b in self.batches:
            out.extend(b.records_with_timestamps())
        return out

    def values(self) -> list[Any]:
        return [v for v, _ in self.records_with_timestamps()]

    def timestamps(self) -> list[int | None]:
        return [t for _, t in self.records_with_timestamps()]

    def clear(self) -> None:
        self.events.clear()


class FakeProcessingTimeService:
    """A clock the test sets; due timers fire (in time order) when the test advances it."""

    def __init__(self, now: int = 0) -> None:
        self.now = now
        self._timers: list[tuple[int, int, Callable[[int], None]]] = []
        self._seq = itertools.count()
        self.registered: list[int] = []

    def current_processing_time(self) -> int:
        return self.now

    def register_timer(self, timestamp_ms: int, callback: Callable[[int], None]) -> Any:
        self.registered.append(timestamp_ms)
        heapq.heappush(self._timers, (timestamp_ms, next(self._seq), callback))
        return timestamp_ms

    def advance_to(self, t: int) -> None:
        self.now = t
        while self._timers and self._timers[0][0] <= t:
            ts, _, cb = heapq.heappop(self._timers)
            cb(ts)

    @property
    def pending(self) -> int:
        return len(self._timers)


@dataclass
class FakeEventGateway:
    """Records the operator's events; with a coordinator, hands each to it (as the JobMaster would)."""

    events: list[Any] = field(default_factory=list)
    coordinator: Any = None
    subtask: int = 0
    attempt: int = 0

    def send_event_to_coordinator(self, event: Any) -> None:
        self.events.append(event)
        if self.coordinator is not None:
            self.coordinator.handle_event_from_operator(self.subtask, self.attempt, event)


def make_context(
    output: Output | None = None,
    processing_time_service: FakeProcessingTimeService | None = None,
    *,
    subtask: int = 0,
    parallelism: int = 1,
    max_parallelism: int = 128,
    key_group_range: KeyGroupRange | None = None,
    attempt: int = 0,
    gateway: Any = None,
    name: str = "op",
    task_name: str = "test task",
    config: dict[str, str] | None = None,
    job_id: str = "job-test",
) -> OperatorContext:
    """An OperatorContext for one subtask; the key-group range defaults to the subtask's share."""
    if key_group_range is None:
        key_group_range = compute_key_group_range_for_operator_index(max_parallelism, parallelism, subtask)
    return OperatorContext(
        job_id=job_id,
        job_name="test job",
        task_name=task_name,
        operator_name=name,
        node_id=1,
        uid=None,
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        attempt_number=attempt,
        key_group_range=key_group_range,
        output=output if output is not None else CollectingOutput(),
        processing_time_service=processing_time_service or FakeProcessingTimeService(),
        event_gateway=gateway or FakeEventGateway(subtask=subtask, attempt=attempt),
        config=dict(config or {}),
    )


# -- run an operator to the end ---------------------------------------------------------------------


def open_operator(op: StreamOperator, **ctx_kwargs: Any) -> CollectingOutput:
    out = CollectingOutput()
    op.setup(make_context(out, **ctx_kwargs))
    op.open()
    return out


def run_one_input(op: StreamOperator, batches: list[RecordBatch], **ctx_kwargs: Any) -> CollectingOutput:
    out = open_operator(op, **ctx_kwargs)
    for b in batches:
        op.process_batch(b)
    op.end_input()
    op.finish()
    op.close()
    return out


def run_source(op: SourceOperator, **ctx_kwargs: Any) -> CollectingOutput:
    out = open_operator(op, **ctx_kwargs)
    for _ in range(100_000):
        if op.emit_next() is InputStatus.END_OF_INPUT:
            break
    op.finish()
    op.close()
    return out


class _CoordinatorGateway:
    """A source subtask's events to its coordinator, as the TaskExecutor's RPC would carry them."""

    def __init__(self, coordinator: Any, subtask: int, attempt: int = 0) -> None:
        self.coordinator, self.subtask, self.attempt = coordinator, subtask, attempt

    def send_event_to_coordinator(self, event: Any) -> None:
        self.coordinator.handle_event_from_operator(self.subtask, self.attempt, event)


@dataclass
class SourceRunCheckpoint:
    coordinator: bytes | None
    splits: list[list[Any]]  # per subtask


class SourceRun:
    """A FLIP-27 source's `parallelism` subtasks in-process: each a SourceReaderOperator with its
    own CollectingOutput, the enumerator in a real SourceCoordinator, events routed both ways as
    the runtime routes them. All subtasks open (register, ask for splits) before any runs, as on a
    cluster; `step(i)` is one emit_next of subtask i; the end of input gets the task's MAX watermark.
    `restored`: a checkpoint (the coordinator's state as is, each subtask's splits as given)."""

    def __init__(
        self, source: Any, parallelism: int, restored: SourceRunCheckpoint | None = None, strategy: Any = None, max_parallelism: int = 128
    ) -> None:
        from runtime.api.connectors.source import SourceCoordinatorProvider, SourceReaderOperator
        from runtime.core.checkpoint import StateInitializationContext
        from runtime.core.operators import FixedCoordinatorContext

        self.coordinator = SourceCoordinatorProvider(source).create(FixedCoordinatorContext("job-test", "source", parallelism))
        if restored is None:
            self.coordinator.start()
        else:
            self.coordinator.reset_coordinator(7, restored.coordinator)
        self.ops: list[Any] = []
        self.outs: list[CollectingOutput] = []
        self.ended = [False] * parallelism
        for i in range(parallelism):
            op = SourceReaderOperator(source, strategy)
            out = CollectingOutput()
            op.setup(make_context(out, subtask=i, parallelism=parallelism, max_parallelism=max_parallelism, gateway=_CoordinatorGateway(self.coordinator, i)))
            splits = restored.splits[i] if restored is not None else None
            op.initialize_state(
                StateInitializationContext()
                if splits is None
                else StateInitializationContext(restored_checkpoint_id=7, operator_lists={"splits": list(splits)} if splits else {})
            )
            self.ops.append(op)
            self.outs.append(out)
        for op in self.ops:
            op.open()
        self.route()

    def route(self) -> None:
        sent = self.coordinator.context.sent
        while sent:
            subtask, _attempt, event = sent.pop(0)
            self.ops[subtask].handle_operator_event(event)

    def step(self, subtask: int) -> InputStatus:
        if self.ended[subtask]:
            return InputStatus.END_OF_INPUT
        op = self.ops[subtask]
        status = op.emit_next()
        self.route()
        if status is InputStatus.END_OF_INPUT:
            self.ended[subtask] = True
            op.output.emit_watermark(Watermark(MAX_TIMESTAMP))
            op.finish()
            op.close()
        return status

    def steps(self, subtask: int, batches: int) -> None:
        """Up to `batches` emit_next calls of one subtask that emit something (stops at its end)."""
        for _ in range(batches):
            if self.step(subtask) is InputStatus.END_OF_INPUT:
                return

    def run(self, max_rounds: int = 1_000_000) -> SourceRun:
        """Every subtask one step at a time, round-robin, until all ended."""
        for _ in range(max_rounds):
            if all(self.ended):
                return self
            for i in range(len(self.ops)):
                self.step(i)
        raise AssertionError(f"the source did not end in {max_rounds} rounds")

    def checkpoint(self, checkpoint_id: int = 3) -> SourceRunCheckpoint:
        """The coordinator first, then every subtask (the runtime's order)."""
        state = self.coordinator.checkpoint_coordinator(checkpoint_id)
        splits = []
        for op in self.ops:
            snap = op.snapshot_state(checkpoint_id) if op.reader is not None else None
            splits.append(list(snap.operator_lists.get("splits", [])) if snap is not None else [])
        return SourceRunCheckpoint(state, splits)

    def values(self, subtask: int) -> list[Any]:
        return self.outs[subtask].values()


def run_split_source(source: Any, parallelism: int = 1, **kwargs: Any) -> list[CollectingOutput]:
    """Every subtask's output of a FLIP-27 source run to its end."""
    return SourceRun(source, parallelism, **kwargs).run().outs


def obj(values: list[Any], ts: list[int] | None = None) -> ObjectBatch:
    return ObjectBatch(values, None if ts is None else np.asarray(ts, dtype=np.int64))


# -- drive an operator step by step -----------------------------------------------------------------


class Harness:
    """Sets up and opens one (keyed) operator; the test feeds batches, watermarks and time."""

    def __init__(
        self,
        operator: StreamOperator,
        key_group_range: KeyGroupRange = ALL_KEY_GROUPS,
        max_parallelism: int = 128,
        backend: str = "hashmap",
        now: int = 0,
        restore: KeyedSnapshot | None = None,
    ) -> None:
        self.op = operator
        self.output = CollectingOutput()
        self.pts = FakeProcessingTimeService(now)
        self.ctx = make_context(
            self.output,
            self.pts,
            key_group_range=key_group_range,
            max_parallelism=max_parallelism,
            config={"state.backend.type": backend},
        )
        operator.setup(self.ctx)
        if restore is not None:
            from runtime.core.checkpoint import StateInitializationContext

            operator.initialize_state(StateInitializationContext(restored_checkpoint_id=1, keyed=restore))
        operator.open()

    def process(self, values: Iterable[Any], timestamps: Iterable[int] | None = None, input_index: int = 0) -> None:
        vals = list(values)
        ts = None if timestamps is None else np.asarray(list(timestamps), dtype=np.int64)
        self.op.process_batch(ObjectBatch(vals, ts), input_index)

    def process_columns(self, columns: dict[str, np.ndarray], timestamps: np.ndarray | None = None) -> None:
        self.op.process_batch(ColumnBatch(columns, timestamps))

    def watermark(self, ts: int, input_index: int = 0) -> None:
        self.op.process_watermark(Watermark(ts), input_index)

    def advance_processing_time(self, t: int) -> None:
        self.pts.advance_to(t)

    def close(self) -> None:
        self.op.finish()
        self.op.close()


def keyed_entries(snapshot: OperatorSnapshot, key_group_range: KeyGroupRange = ALL_KEY_GROUPS) -> KeyedSnapshot:
    """A snapshot's keyed state in the canonical form, whatever the backend wrote (a RocksDB
    checkpoint holds its state entries as native files and only its timers as entries)."""
    from runtime.state.rocksdb import native_to_keyed

    out: KeyedSnapshot = {kg: dict(states) for kg, states in snapshot.materialize_keyed().items()}
    native = snapshot.materialize_native()
    if native is not None:
        for kg, states in native_to_keyed([native], key_group_range).items():
            out.setdefault(kg, {}).update(states)
    return out


def through_state_files(
    snapshot: OperatorSnapshot | KeyedSnapshot, directory: str, key_group_range: KeyGroupRange
) -> KeyedSnapshot:
    """A snapshot as a restore sees it: written as checkpoint rows (native files included), read
    back for one key-group range, in the canonical form."""
    from runtime.core.checkpoint import OperatorSnapshot
    from runtime.state.rocksdb import native_to_keyed
    from runtime.storage.state_files import read_operator_state, write_state_file

    snap = snapshot if isinstance(snapshot, OperatorSnapshot) else OperatorSnapshot(keyed=snapshot)
    handle = write_state_file(directory, 1, 0, 0, 1, {"op": snap})
    assert handle is not None
    ctx = read_operator_state(directory, [handle.path], "op", key_group_range, 0, 1)
    out = {kg: dict(states) for kg, states in ctx.keyed.items() if kg in key_group_range}
    for kg, states in (native_to_keyed(ctx.native, key_group_range) if ctx.native else {}).items():
        out.setdefault(kg, {}).update(states)
    return out
