"""CheckpointBarrierHandler: aligned (exactly-once) and tracker (at-least-once) semantics."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from runtime.core.checkpoint import CheckpointBarrier, CheckpointingMode
from runtime.taskmanager.checkpoint_barrier_handler import (
    AlignedBarrierHandler,
    BarrierTracker,
    CheckpointBarrierHandler,
    create_barrier_handler,
)

pytestmark = pytest.mark.unit


@dataclass
class TestingBlockableGate:
    """Test double of the InputGate's blocking part: settable callables, and what happened."""

    __test__ = False  # not a pytest class

    blocked: set[int] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    block_channel_fn: Callable[[int], None] | None = None
    unblock_all_fn: Callable[[], None] | None = None

    def block_channel(self, index: int) -> None:
        self.calls.append(f"block {index}")
        self.blocked.add(index)
        if self.block_channel_fn is not None:
            self.block_channel_fn(index)

    def unblock_all(self) -> None:
        self.calls.append("unblock_all")
        self.blocked.clear()
        if self.unblock_all_fn is not None:
            self.unblock_all_fn()


@dataclass
class Recorder:
    """on_checkpoint / on_abort, recording in order; `gate` snapshots what is blocked at each call."""

    gate: TestingBlockableGate
    events: list[tuple] = field(default_factory=list)

    def on_checkpoint(self, b: CheckpointBarrier) -> None:
        self.events.append(("checkpoint", b.checkpoint_id, frozenset(self.gate.blocked)))

    def on_abort(self, cid: int, reason: str) -> None:
        self.events.append(("abort", cid, reason))

    @property
    def triggered(self) -> list[int]:
        return [e[1] for e in self.events if e[0] == "checkpoint"]

    @property
    def aborted(self) -> list[int]:
        return [e[1] for e in self.events if e[0] == "abort"]


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def make(mode: CheckpointingMode, n: int = 3) -> tuple[CheckpointBarrierHandler, TestingBlockableGate, Recorder, FakeClock]:
    gate = TestingBlockableGate()
    rec = Recorder(gate)
    clock = FakeClock()
    h = create_barrier_handler(mode, n, gate, rec.on_checkpoint, rec.on_abort, clock)
    return h, gate, rec, clock


def b(cid: int) -> CheckpointBarrier:
    return CheckpointBarrier(cid, 1000 + cid)


EO, ALO = CheckpointingMode.EXACTLY_ONCE, CheckpointingMode.AT_LEAST_ONCE


def test_factory_picks_the_handler_by_mode() -> None:
    assert type(make(EO)[0]) is AlignedBarrierHandler
    assert type(make(ALO)[0]) is BarrierTracker
    with pytest.raises(ValueError):
        make(EO, 0)


# ---- aligned (exactly-once) -----------------------------------------------------------------

@pytest.mark.parametrize("order", [(0, 1, 2), (2, 0, 1), (1, 2, 0)])
def test_aligned_blocks_each_channel_until_all_delivered_then_triggers_once(order: tuple[int, int, int]) -> None:
    h, gate, rec, clock = make(EO)
    first, second, last = order
    h.process_barrier(first, b(1))
    assert h.pending_checkpoint_id == 1 and gate.blocked == {first} and rec.events == []
    clock.t += 0.25
    h.process_barrier(second, b(1))
    assert gate.blocked == {first, second} and rec.events == []
    clock.t += 0.5
    h.process_barrier(last, b(1))
    # channels unblocked before the checkpoint is taken; the last one was never blocked
    assert rec.events == [("checkpoint", 1, frozenset())]
    assert gate.calls == [f"block {first}", f"block {second}", "unblock_all"]
    assert h.pending_checkpoint_id is None and h.last_alignment_ms == 750
    # a duplicate/late barrier of the triggered checkpoint changes nothing
    h.process_barrier(first, b(1))
    assert rec.triggered == [1] and gate.blocked == set() and h.pending_checkpoint_id is None
    # the next checkpoint aligns again
    for ch in (2, 1, 0):
        h.process_barrier(ch, b(2))
    assert rec.triggered == [1, 2]


def test_aligned_newer_barrier_aborts_pending_and_starts_aligning_the_new_one() -> None:
    h, gate, rec, _ = make(EO)
    h.process_barrier(0, b(1))
    h.process_barrier(1, b(1))
    h.process_barrier(2, b(2))  # checkpoint 1 can never align now
    assert rec.aborted == [1] and "newer barrier" in rec.events[0][2] and "2" in rec.events[0][2]
    assert h.pending_checkpoint_id == 2 and gate.blocked == {2}
    assert gate.calls == ["block 0", "block 1", "unblock_all", "block 2"]
    h.process_barrier(0, b(1))  # late barrier of the aborted checkpoint: ignored
    assert gate.blocked == {2} and h.pending_checkpoint_id == 2
    h.process_barrier(0, b(2))
    h.process_barrier(1, b(2))
    assert rec.triggered == [2] and rec.aborted == [1] and gate.blocked == set()


def test_aligned_lower_or_old_ids_are_ignored() -> None:
    h, gate, rec, _ = make(EO)
    h.process_barrier(0, b(5))
    h.process_barrier(1, b(4))  # lower than the pending one
    assert gate.blocked == {0} and h.pending_checkpoint_id == 5 and rec.events == []
    h.process_barrier(1, b(5))
    h.process_barrier(2, b(5))
    assert rec.triggered == [5]
    h.process_barrier(2, b(3))  # lower than the newest seen, nothing pending
    h.process_barrier(1, b(5))
    assert h.pending_checkpoint_id is None and gate.calls.count("block 1") == 1 and rec.triggered == [5]


def test_aligned_single_open_channel_triggers_immediately() -> None:
    h, gate, rec, _ = make(EO, n=1)
    h.process_barrier(0, b(1))
    assert rec.triggered == [1] and gate.calls == ["unblock_all"] and h.last_alignment_ms == 0
    h2, gate2, rec2, _ = make(EO, n=3)
    h2.process_end_of_partition(0)
    h2.process_end_of_partition(2)
    h2.process_barrier(1, b(7))
    assert rec2.triggered == [7] and "block 1" not in gate2.calls


def test_aligned_end_of_partition_before_alignment_counts_as_aligned() -> None:
    h, gate, rec, _ = make(EO)
    h.process_end_of_partition(1)
    h.process_end_of_partition(1)  # idempotent
    assert h.num_open_channels == 2
    h.process_barrier(0, b(1))
    assert rec.events == [] and gate.blocked == {0}
    h.process_barrier(2, b(1))
    assert rec.triggered == [1]
    # ...and for every later checkpoint
    h.process_barrier(2, b(2))
    h.process_barrier(0, b(2))
    assert rec.triggered == [1, 2]


def test_aligned_end_of_partition_during_alignment_completes_it() -> None:
    h, gate, rec, _ = make(EO)
    h.process_barrier(0, b(1))
    h.process_end_of_partition(1)
    assert rec.events == [] and h.pending_checkpoint_id == 1
    h.process_end_of_partition(2)  # the last unaligned channel ends
    assert rec.events == [("checkpoint", 1, frozenset())] and gate.blocked == set()
    # barrier on an ended channel (a confused caller) is ignored
    h.process_barrier(1, b(2))
    assert h.pending_checkpoint_id is None


def test_aligned_abort_pending_unblocks_and_reports() -> None:
    h, gate, rec, _ = make(EO)
    h.abort_pending("nothing pending")  # no-op
    assert rec.events == [] and gate.calls == []
    h.process_barrier(0, b(3))
    h.process_barrier(2, b(3))
    assert gate.blocked == {0, 2}
    h.abort_pending("task canceled")
    assert gate.blocked == set() and rec.events == [("abort", 3, "task canceled")]
    assert h.pending_checkpoint_id is None
    h.process_barrier(1, b(3))  # the rest of checkpoint 3 is ignored
    assert h.pending_checkpoint_id is None and rec.triggered == []
    for ch in range(3):
        h.process_barrier(ch, b(4))
    assert rec.triggered == [4]


def test_aligned_on_checkpoint_failure_leaves_channels_unblocked() -> None:
    gate = TestingBlockableGate()

    def boom(_: CheckpointBarrier) -> None:
        raise RuntimeError("snapshot failed")

    h = AlignedBarrierHandler(2, gate, boom, lambda c, r: None)
    h.process_barrier(0, b(1))
    with pytest.raises(RuntimeError):
        h.process_barrier(1, b(1))
    assert gate.blocked == set() and h.pending_checkpoint_id is None


def test_channel_index_is_checked() -> None:
    h, *_ = make(EO)
    with pytest.raises(ValueError, match="out of range"):
        h.process_barrier(3, b(1))
    with pytest.raises(ValueError, match="out of range"):
        h.process_end_of_partition(-1)


# ---- tracker (at-least-once) ----------------------------------------------------------------

def test_tracker_never_blocks_and_triggers_when_every_channel_delivered() -> None:
    h, gate, rec, clock = make(ALO)
    h.process_barrier(1, b(1))
    clock.t += 0.1
    h.process_barrier(0, b(1))
    assert h.pending_checkpoint_id == 1 and rec.events == []
    clock.t += 0.1
    h.process_barrier(2, b(1))
    assert rec.triggered == [1] and h.last_alignment_ms == 200
    assert gate.calls == []  # never blocks anything
    h.process_barrier(1, b(1))  # late duplicate
    assert rec.triggered == [1] and h.pending_checkpoint_id is None


def test_tracker_overlapping_checkpoints_and_supersede() -> None:
    h, gate, rec, _ = make(ALO)
    h.process_barrier(0, b(1))
    h.process_barrier(0, b(2))  # channel 0 is fast: already at checkpoint 2
    h.process_barrier(1, b(1))
    assert isinstance(h, BarrierTracker) and h.pending_checkpoint_ids == [1, 2]
    assert h.pending_checkpoint_id == 2
    h.process_barrier(1, b(2))
    h.process_barrier(2, b(2))  # checkpoint 2 completes before 1 (channel 2 skipped barrier 1)
    assert rec.aborted == [1] and "subsumed" in rec.events[0][2]
    assert rec.triggered == [2] and [e[0] for e in rec.events] == ["abort", "checkpoint"]
    h.process_barrier(2, b(1))  # forgotten
    assert h.pending_checkpoint_ids == [] and rec.triggered == [2]
    assert gate.calls == []


def test_tracker_ended_channels_count() -> None:
    h, _, rec, _ = make(ALO)
    h.process_end_of_partition(2)
    h.process_barrier(0, b(1))
    h.process_barrier(1, b(1))
    assert rec.triggered == [1]
    h.process_barrier(0, b(2))
    h.process_barrier(0, b(3))
    h.process_barrier(1, b(2))
    assert rec.triggered == [1, 2] and h.pending_checkpoint_id == 3
    h.process_end_of_partition(1)  # channel 1 ends: checkpoint 3 now has every open channel
    assert rec.triggered == [1, 2, 3]


def test_tracker_end_of_partition_triggers_newest_complete_and_aborts_older() -> None:
    h, _, rec, _ = make(ALO, n=2)
    h.process_barrier(0, b(1))
    h.process_barrier(0, b(2))
    h.process_end_of_partition(1)
    assert rec.events[0][:2] == ("abort", 1) and rec.triggered == [2]


def test_tracker_abort_pending() -> None:
    h, gate, rec, _ = make(ALO)
    h.process_barrier(0, b(1))
    h.process_barrier(0, b(2))
    h.abort_pending("task canceled")
    assert rec.events == [("abort", 1, "task canceled"), ("abort", 2, "task canceled")]
    assert h.pending_checkpoint_id is None and gate.calls == []
    h.process_barrier(1, b(2))
    assert h.pending_checkpoint_id is None


# ---- triggered by the coordinator once every upstream task finished (FLIP-147) --------------
@pytest.mark.parametrize("mode", list(CheckpointingMode))
def test_a_trigger_at_unfinished_channels_waits_for_each_open_channel_to_end(mode: CheckpointingMode) -> None:
    """The producers finished, but their last records and EndOfPartition may still be on the way:
    the snapshot comes after the end of every channel still open, never before."""
    h, gate, rec, _ = make(mode, 3)
    h.process_end_of_partition(1)
    h.trigger_at_unfinished_channels(b(7))
    assert rec.triggered == [] and not gate.blocked
    h.process_end_of_partition(0)
    assert rec.triggered == []
    h.process_end_of_partition(2)
    assert rec.triggered == [7] and not gate.blocked


@pytest.mark.parametrize("mode", list(CheckpointingMode))
def test_a_trigger_when_every_channel_ended_snapshots_at_once_and_late_triggers_are_ignored(mode: CheckpointingMode) -> None:
    h, _, rec, _ = make(mode, 2)
    h.process_end_of_partition(0)
    h.process_end_of_partition(1)
    h.trigger_at_unfinished_channels(b(3))
    assert rec.triggered == [3]
    h.trigger_at_unfinished_channels(b(3))  # a repeated trigger of the same checkpoint
    h.trigger_at_unfinished_channels(b(2))  # an older one
    assert rec.triggered == [3] and rec.aborted == []


def test_aligned_a_trigger_aborts_an_alignment_its_finished_producers_left_incomplete() -> None:
    h, gate, rec, _ = make(CheckpointingMode.EXACTLY_ONCE, 2)
    h.process_barrier(0, b(4))
    assert gate.blocked == {0}
    h.trigger_at_unfinished_channels(b(5))
    assert rec.aborted == [4] and not gate.blocked
    h.process_end_of_partition(0)
    h.process_end_of_partition(1)
    assert rec.triggered == [5]
