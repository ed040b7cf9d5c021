"""The runtime half of FLIP-27: the source coordinator (enumerator host + assignment tracker), the
event valve, and the reader operator's per-split watermarks, each without a cluster."""
from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.base import Source
from runtime.api.connectors.source import (
    AddSplitEvent,
    NoMoreSplitsEvent,
    ReaderRegistrationEvent,
    RequestSplitEvent,
    SourceCoordinator,
    SourceReaderBase,
    SourceReaderOperator,
    SplitAssignmentTracker,
    SplitEnumerator,
)
from runtime.api.connectors.source.api import SPLITS_STATE
from runtime.core.checkpoint import StateInitializationContext
from runtime.core.operators import FixedCoordinatorContext, InputStatus
from runtime.core.records import MAX_TIMESTAMP, ObjectBatch, RecordBatch, Watermark, WatermarkStatus
from runtime.jobmanager.scheduler.coordinators import CoordinatorServices, EventValve
from tests.harness import CollectingOutput, FakeEventGateway, FakeProcessingTimeService, make_context

pytestmark = pytest.mark.unit


# --- a small source: a split is (name, values), read one value per poll ------------------------------


class Split:
    def __init__(self, name: str, values: list[int], done: int = 0) -> None:
        self.name, self.values, self.done = name, values, done

    @property
    def split_id(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Split) and (self.name, self.values, self.done) == (other.name, other.values, other.done)

    def __repr__(self) -> str:
        return f"Split({self.name}, done={self.done})"


class ListEnumerator(SplitEnumerator[Split, list[Split]]):
    def __init__(self, context: Any, pending: list[Split]) -> None:
        self.context, self.pending = context, list(pending)

    def handle_split_request(self, subtask: int, requester_hostname: str | None) -> None:
        if self.pending:
            self.context.assign_split(self.pending.pop(0), subtask)
        else:
            self.context.signal_no_more_splits(subtask)

    def add_splits_back(self, splits: list[Split], subtask: int) -> None:
        self.pending = list(splits) + self.pending

    def add_reader(self, subtask: int) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> list[Split]:
        return list(self.pending)


class ListReader(SourceReaderBase[Split]):
    def read_next(self, split: Split) -> tuple[RecordBatch, Split] | None:
        if split.done >= len(split.values):
            return None
        v = split.values[split.done]
        return ObjectBatch([v]), Split(split.name, split.values, split.done + 1)


class ListSource(Source):
    def __init__(self, splits: list[Split]) -> None:
        self.splits = splits

    def create_enumerator(self, context: Any) -> ListEnumerator:
        return ListEnumerator(context, self.splits)

    def restore_enumerator(self, context: Any, checkpoint: Any) -> ListEnumerator:
        return ListEnumerator(context, checkpoint)

    def create_reader(self, context: Any) -> ListReader:
        return ListReader(context)


def _coordinator(splits: list[Split], parallelism: int = 2) -> tuple[SourceCoordinator, FixedCoordinatorContext]:
    ctx = FixedCoordinatorContext("job", "src", parallelism)
    coord = SourceCoordinator(ctx, ListSource(splits))
    coord.start()
    return coord, ctx


def _assigned(ctx: FixedCoordinatorContext, subtask: int) -> list[str]:
    return [s.split_id for st, _, e in ctx.sent if st == subtask and isinstance(e, AddSplitEvent) for s in e.splits]


def test_the_coordinator_assigns_on_request_to_the_registered_attempt_only() -> None:
    coord, ctx = _coordinator([Split("a", [1]), Split("b", [2])])
    coord.handle_event_from_operator(0, 3, RequestSplitEvent())  # before registering: dropped
    assert ctx.sent == []
    coord.handle_event_from_operator(0, 3, ReaderRegistrationEvent(0, 3))
    coord.handle_event_from_operator(0, 2, RequestSplitEvent())  # an older attempt's request: dropped
    coord.handle_event_from_operator(0, 3, RequestSplitEvent())
    assert [(st, att) for st, att, _ in ctx.sent] == [(0, 3)] and _assigned(ctx, 0) == ["a"]
    coord.execution_attempt_failed(0, 3)
    coord.handle_event_from_operator(0, 3, RequestSplitEvent())  # the failed attempt no longer asks
    assert _assigned(ctx, 0) == ["a"]


def test_a_speculative_attempt_gets_what_its_subtask_got_and_every_later_split_too() -> None:
    coord, ctx = _coordinator([Split(n, [0]) for n in "abc"], parallelism=1)
    assert coord.supports_concurrent_execution_attempts
    coord.handle_event_from_operator(0, 0, ReaderRegistrationEvent(0, 0))
    coord.handle_event_from_operator(0, 0, RequestSplitEvent())  # a -> attempt 0
    ctx.sent.clear()
    coord.handle_event_from_operator(0, 1, ReaderRegistrationEvent(0, 1))  # a speculative attempt: a replayed to it alone
    assert [(att, [x.split_id for x in e.splits]) for _, att, e in ctx.sent] == [(1, ["a"])]
    assert coord.readers[0].attempt == 0  # the enumerator still sees one reader
    ctx.sent.clear()
    coord.handle_event_from_operator(0, 1, RequestSplitEvent())  # either attempt may ask: b -> both
    assert sorted((att, [x.split_id for x in e.splits]) for _, att, e in ctx.sent) == [(0, ["b"]), (1, ["b"])]
    coord.execution_attempt_failed(0, 0)  # the original loses (cancelled): the other goes on as the subtask's reader
    assert coord.readers[0].attempt == 1
    ctx.sent.clear()
    coord.handle_event_from_operator(0, 1, RequestSplitEvent())
    coord.handle_event_from_operator(0, 1, RequestSplitEvent())  # nothing left: no more splits
    assert [(att, type(e).__name__) for _, att, e in ctx.sent] == [(1, "AddSplitEvent"), (1, "NoMoreSplitsEvent")]
    ctx.sent.clear()
    coord.handle_event_from_operator(0, 2, ReaderRegistrationEvent(0, 2))  # a late attempt: everything, then the end
    assert [(att, type(e).__name__) for _, att, e in ctx.sent] == [(2, "AddSplitEvent"), (2, "NoMoreSplitsEvent")]
    assert [x.split_id for x in ctx.sent[0][2].splits] == ["a", "b", "c"]


def test_a_failed_reader_gets_back_what_it_got_after_the_checkpoint_it_restarts_from() -> None:
    coord, ctx = _coordinator([Split(n, [0]) for n in "abcde"], parallelism=2)
    for s in (0, 1):
        coord.handle_event_from_operator(s, 0, ReaderRegistrationEvent(s, 0))
    coord.handle_event_from_operator(0, 0, RequestSplitEvent())  # a -> 0 (before checkpoint 1)
    state1 = coord.checkpoint_coordinator(1)
    coord.handle_event_from_operator(0, 0, RequestSplitEvent())  # b -> 0 (after 1)
    coord.handle_event_from_operator(1, 0, RequestSplitEvent())  # c -> 1
    coord.checkpoint_coordinator(2)
    coord.handle_event_from_operator(0, 0, RequestSplitEvent())  # d -> 0 (after 2)
    coord.notify_checkpoint_complete(1, [])
    coord.subtask_reset(0, 1)  # subtask 0 restarts from checkpoint 1: b and d come back, a stays with it
    enumerator = coord.enumerator
    assert isinstance(enumerator, ListEnumerator)
    assert [s.split_id for s in enumerator.pending] == ["b", "d", "e"]
    # a global restore from checkpoint 1 puts the enumerator back to its state then
    coord.reset_coordinator(1, state1)
    enumerator = coord.enumerator
    assert isinstance(enumerator, ListEnumerator) and [s.split_id for s in enumerator.pending] == ["b", "c", "d", "e"]
    assert coord.readers == {}  # every reader registers again
    assert pickle.loads(state1)["enumerator"] == [Split(n, [0]) for n in "bcde"]


def test_tracker_drops_what_a_completed_checkpoint_covers() -> None:
    t = SplitAssignmentTracker()
    t.record(0, ["x"])
    t.on_checkpoint(5)
    t.record(0, ["y"])
    t.on_checkpoint(6)
    t.record(0, ["z"])
    t.on_checkpoint_complete(5)
    assert t.take_back(0, 5) == ["y", "z"]
    assert t.take_back(0, None) == []


def test_call_async_runs_off_thread_then_on_the_coordinator_and_a_failing_handler_fails_the_job() -> None:
    got: list[Any] = []

    class Periodic(ListEnumerator):
        def start(self) -> None:
            self.context.call_async(lambda: 41 + 1, lambda r, e: got.append((r, e)), 0.0, 1.0)

    class PSource(ListSource):
        def create_enumerator(self, context: Any) -> ListEnumerator:
            return Periodic(context, [])

    ctx = FixedCoordinatorContext("job", "src", 1)
    coord = SourceCoordinator(ctx, PSource([]))
    coord.start()
    assert ctx.run_timers() == 1
    coord.worker().shutdown(wait=True)  # the callable ran on the worker; its handler came back through execute
    assert got == [(42, None)]
    coord.close()


# --- the event valve ------------------------------------------------------------------------------------


def test_the_valve_holds_events_while_closed_and_keeps_each_attempts_order() -> None:
    delivered: list[tuple[int, int, bytes]] = []

    async def scenario() -> None:
        async def deliver(vertex: str, subtask: int, attempt: int, node: int, payload: bytes) -> bool:
            await asyncio.sleep(0.001 * (3 - len(delivered) % 3))  # later sends would overtake earlier ones
            delivered.append((subtask, attempt, payload))
            return True

        valve = EventValve(CoordinatorServices(asyncio.get_running_loop(), deliver), "v", 1)
        for i in range(3):
            valve.send(0, 0, bytes([i]))
        valve.close()
        await valve.drain()  # what was sent before the close is delivered
        valve.send(0, 0, b"late")
        await asyncio.sleep(0.01)
        assert [p for _, _, p in delivered] == [b"\x00", b"\x01", b"\x02"]
        valve.open()
        await valve.drain()

    asyncio.run(scenario())
    assert [p for _, _, p in delivered] == [b"\x00", b"\x01", b"\x02", b"late"]


# --- the reader operator ----------------------------------------------------------------------------------


class StatusOutput(CollectingOutput):
    """Also keeps the watermark statuses (True: idle)."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: list[bool] = []

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.statuses.append(status.idle)


ReaderUnderTest = tuple[SourceReaderOperator, StatusOutput, FakeEventGateway, FakeProcessingTimeService]


def _reader_operator(strategy: WatermarkStrategy | None, restored: list[Split] | None = None) -> ReaderUnderTest:
    op = SourceReaderOperator(ListSource([]), strategy)
    out, gateway, pts = StatusOutput(), FakeEventGateway(), FakeProcessingTimeService()
    op.setup(make_context(out, pts, gateway=gateway, config={"pipeline.auto-watermark-interval": "0"}))
    op.initialize_state(StateInitializationContext(restored_checkpoint_id=3, operator_lists={SPLITS_STATE: restored}) if restored is not None
                        else StateInitializationContext())
    op.open()
    return op, out, gateway, pts


def test_watermarks_are_per_split_and_a_finished_split_no_longer_holds_back() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, ts: v)
    op, out, gateway, _ = _reader_operator(strategy)
    assert gateway.events == [ReaderRegistrationEvent(0, 0), RequestSplitEvent()]
    op.handle_operator_event(AddSplitEvent([Split("slow", [10, 20, 30]), Split("fast", [100, 200])]))
    for _ in range(3):
        assert op.emit_next() is InputStatus.MORE_AVAILABLE
    assert out.values() == [10, 20, 30] and out.watermarks == []  # split "fast" has no records yet: it holds back
    op.emit_next()  # "slow" ends (released: it no longer holds back) and 100 of "fast" comes
    assert out.watermarks == [99]
    op.emit_next()
    assert out.watermarks == [99, 199]
    # "fast" ends: with no split held, the finished ones' largest timestamp stays the reader's
    assert op.emit_next() is InputStatus.NOTHING_AVAILABLE and gateway.events[-1] == RequestSplitEvent()
    assert out.watermarks == [99, 199]
    op.handle_operator_event(NoMoreSplitsEvent())
    assert op.emit_next() is InputStatus.END_OF_INPUT


def test_reader_state_is_its_unfinished_splits_and_a_restore_goes_on_from_them() -> None:
    op, out, _, _ = _reader_operator(None)
    op.handle_operator_event(AddSplitEvent([Split("a", [1, 2, 3])]))
    op.emit_next()
    snap = op.snapshot_state(7)
    assert snap is not None and snap.operator_lists[SPLITS_STATE] == [Split("a", [1, 2, 3], 1)]
    op2, out2, gateway2, _ = _reader_operator(None, restored=snap.operator_lists[SPLITS_STATE])
    assert RequestSplitEvent() not in gateway2.events  # it has work: it asks only when done
    while op2.emit_next() is InputStatus.MORE_AVAILABLE:
        pass
    assert out.values() + out2.values() == [1, 2, 3]


def test_idleness_only_with_with_idleness_and_a_watermark_makes_the_output_active_again() -> None:
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, ts: v).with_idleness(100)
    op, out, _, pts = _reader_operator(strategy)
    op.emit_next()
    assert out.statuses == []  # not idle before the idle timeout
    pts.now = 150
    op.emit_next()
    assert out.statuses == [True]
    assert op.output is not None
    op.output.emit_watermark(Watermark(MAX_TIMESTAMP))  # the task's final (or drained) watermark
    assert out.statuses == [True, False] and out.watermarks[-1] == MAX_TIMESTAMP
    plain, plain_out, _, plain_pts = _reader_operator(WatermarkStrategy.for_monotonous_timestamps())
    plain_pts.now = 10_000
    assert plain.emit_next() is InputStatus.NOTHING_AVAILABLE
    assert plain_out.statuses == []  # without with_idleness a reader with no split never goes idle
