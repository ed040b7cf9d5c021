"""What a task does with the checkpoint barriers arriving on its input channels.

Flink: CheckpointBarrierHandler, SingleCheckpointBarrierHandler (aligned, exactly-once) and
CheckpointBarrierTracker (at-least-once). The task thread hands every barrier and every
EndOfPartition it takes from its InputGate to the handler; the handler decides when the task
snapshots its state (`on_checkpoint`) and when a checkpoint is given up (`on_abort`).

- Aligned (EXACTLY_ONCE): the first barrier of checkpoint n starts the alignment; each channel
  that delivered barrier n is blocked in the gate (its later records belong to n+1) until every
  channel still open delivered it; then the channels are unblocked and the task checkpoints. The
  snapshot so contains exactly the records before barrier n on every channel.
- Tracker (AT_LEAST_ONCE): nothing is blocked; the task checkpoints once barrier n came from
  every open channel, so records after barrier n on a fast channel may already be in the
  snapshot (replayed again after a restore: at least once).

A channel that ended (EndOfPartition) counts as aligned for the pending and every later
checkpoint. Once every upstream task finished, no barrier can come in-band: the coordinator
triggers the task itself (FLIP-147), and `trigger_at_unfinished_channels` takes the barrier as
arriving at the end of each channel still open (its remaining records and EndOfPartition are
already on their way: the producer finished), so the snapshot follows the last record of every
channel, as an in-band barrier would. Everything runs on the task thread; the handler is not
thread-safe.
"""
from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

from runtime.core.checkpoint import CheckpointBarrier, CheckpointingMode

log = logging.getLogger(__name__)

OnCheckpoint = Callable[[CheckpointBarrier], None]
OnAbort = Callable[[int, str], None]
Logger: TypeAlias = logging.Logger | logging.LoggerAdapter[Any]

MAX_TRACKED_CHECKPOINTS = 50  # Flink: CheckpointBarrierTracker.MAX_CHECKPOINTS_TO_TRACK


class BlockableGate(Protocol):
    """The part of runtime.taskmanager.network.input.InputGate the handler uses."""

    def block_channel(self, index: int) -> None: ...

    def unblock_all(self) -> None: ...


class CheckpointBarrierHandler(ABC):
    """Flink: CheckpointBarrierHandler -- barrier and end-of-partition bookkeeping of one task."""

    def __init__(
        self,
        num_channels: int,
        gate: BlockableGate,
        on_checkpoint: OnCheckpoint,
        on_abort: OnAbort,
        clock: Callable[[], float] = time.monotonic,
        *,
        logger: Logger | None = None,
    ) -> None:
        if num_channels < 1:
            raise ValueError(f"a barrier handler needs at least one input channel, got {num_channels}")
        self.num_channels = num_channels
        self._gate = gate
        self._on_checkpoint = on_checkpoint
        self._on_abort = on_abort
        self._clock = clock
        self._log: Logger = logger if logger is not None else log
        self._ended = [False] * num_channels
        self._num_ended = 0
        self._newest_id = -1  # highest checkpoint id seen in a barrier (ids only grow)
        self._last_alignment_ms = 0

    # ---- task thread --------------------------------------------------------------------------
    @abstractmethod
    def process_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        """A barrier was taken from gate channel `channel`."""

    def process_end_of_partition(self, channel: int) -> None:
        """Channel `channel` delivered EndOfPartition: it counts as aligned for the pending and
        every later checkpoint (may trigger the pending one). Idempotent per channel."""
        self._check_channel(channel)
        if self._ended[channel]:
            return
        self._ended[channel] = True
        self._num_ended += 1
        self._on_channel_ended(channel)

    def trigger_at_unfinished_channels(self, barrier: CheckpointBarrier) -> None:
        """The coordinator triggered this task because every upstream task finished (Flink:
        StreamTask.triggerUnfinishedChannelsCheckpoint). Unlike Flink's, a Millrace producer
        finishes without waiting for its consumers to take everything, so the barrier is not
        taken at once: each channel still open aligns when it ends (its EndOfPartition follows its
        last record). Triggers now if every channel ended already."""
        if barrier.checkpoint_id <= self._newest_id:
            return  # a late trigger of a checkpoint already triggered, subsumed or aborted
        self._start_without_barrier(barrier)

    @abstractmethod
    def _start_without_barrier(self, barrier: CheckpointBarrier) -> None: ...

    @abstractmethod
    def abort_pending(self, reason: str) -> None:
        """Give up the pending checkpoint(s) (e.g. the task is canceled): `on_abort` for each,
        and every blocked channel is unblocked. No-op when nothing is pending."""

    @property
    def last_alignment_ms(self) -> int:
        """Time from the first to the last barrier of the most recently triggered checkpoint."""
        return self._last_alignment_ms

    @property
    @abstractmethod
    def pending_checkpoint_id(self) -> int | None:
        """The checkpoint whose barriers are being collected (the newest, if several)."""

    @property
    def num_open_channels(self) -> int:
        return self.num_channels - self._num_ended

    # ---- internals ----------------------------------------------------------------------------
    @abstractmethod
    def _on_channel_ended(self, channel: int) -> None: ...

    def _check_channel(self, channel: int) -> None:
        if not 0 <= channel < self.num_channels:
            raise ValueError(f"channel {channel} out of range: the gate has {self.num_channels} channels")

    def _elapsed_ms(self, since: float) -> int:
        return max(0, round((self._clock() - since) * 1000))


class AlignedBarrierHandler(CheckpointBarrierHandler):
    """Flink: SingleCheckpointBarrierHandler with aligned checkpoints (EXACTLY_ONCE)."""

    def __init__(
        self,
        num_channels: int,
        gate: BlockableGate,
        on_checkpoint: OnCheckpoint,
        on_abort: OnAbort,
        clock: Callable[[], float] = time.monotonic,
        *,
        logger: Logger | None = None,
    ) -> None:
        super().__init__(num_channels, gate, on_checkpoint, on_abort, clock, logger=logger)
        self._pending: CheckpointBarrier | None = None
        self._aligned = [False] * num_channels  # delivered the pending barrier
        self._num_done = 0  # channels aligned or ended, for the pending checkpoint
        self._started = 0.0

    @property
    def pending_checkpoint_id(self) -> int | None:
        return None if self._pending is None else self._pending.checkpoint_id

    def process_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        self._check_channel(channel)
        if self._ended[channel]:
            return  # why: nothing follows EndOfPartition on a channel; ignore a confused caller
        cid = barrier.checkpoint_id
        pending = self._pending
        if pending is not None:
            pid = pending.checkpoint_id
            if cid == pid:
                if not self._aligned[channel]:
                    self._mark_aligned(channel)
                return
            if cid < pid:
                return  # an older checkpoint, already given up
            self._abort(f"newer barrier of checkpoint {cid} arrived on channel {channel} "
                        f"before the alignment of checkpoint {pid} completed")
        elif cid <= self._newest_id:
            return  # late barrier of a checkpoint already triggered or aborted
        self._start(channel, barrier)

    def abort_pending(self, reason: str) -> None:
        if self._pending is not None:
            self._abort(reason)

    def _start_without_barrier(self, barrier: CheckpointBarrier) -> None:
        if self._pending is not None:
            self._abort(f"checkpoint {barrier.checkpoint_id} was triggered before the alignment of "
                        f"checkpoint {self._pending.checkpoint_id} completed")
        self._newest_id = barrier.checkpoint_id
        self._pending = barrier
        self._aligned = [False] * self.num_channels
        self._num_done = self._num_ended
        self._started = self._clock()
        self._log.debug("checkpoint %d: triggered with every upstream task finished; %d channels to end",
                        barrier.checkpoint_id, self.num_open_channels)
        self._maybe_trigger()

    def _on_channel_ended(self, channel: int) -> None:
        if self._pending is None or self._aligned[channel]:
            return  # why: an aligned channel is blocked, so it cannot end; counted already
        self._num_done += 1
        self._maybe_trigger()

    def _start(self, channel: int, barrier: CheckpointBarrier) -> None:
        self._newest_id = barrier.checkpoint_id
        self._pending = barrier
        self._aligned = [False] * self.num_channels
        self._num_done = self._num_ended
        self._started = self._clock()
        self._log.debug("checkpoint %d: alignment started by channel %d", barrier.checkpoint_id, channel)
        self._mark_aligned(channel)

    def _mark_aligned(self, channel: int) -> None:
        self._aligned[channel] = True
        self._num_done += 1
        if not self._maybe_trigger():
            self._gate.block_channel(channel)  # why: the last channel need not be blocked at all

    def _maybe_trigger(self) -> bool:
        barrier = self._pending
        if barrier is None or self._num_done < self.num_channels:
            return False
        self._last_alignment_ms = self._elapsed_ms(self._started)
        self._reset()
        self._gate.unblock_all()
        self._log.debug("checkpoint %d: aligned in %d ms", barrier.checkpoint_id, self._last_alignment_ms)
        self._on_checkpoint(barrier)
        return True

    def _abort(self, reason: str) -> None:
        barrier = self._pending
        assert barrier is not None
        self._reset()
        self._gate.unblock_all()
        self._log.debug("checkpoint %d aborted during alignment: %s", barrier.checkpoint_id, reason)
        self._on_abort(barrier.checkpoint_id, reason)

    def _reset(self) -> None:
        self._pending = None
        self._num_done = 0
        self._aligned = [False] * self.num_channels


@dataclass
class _PendingCount:
    """Flink: CheckpointBarrierTracker.CheckpointBarrierCount."""

    barrier: CheckpointBarrier
    started: float
    channels: set[int] = field(default_factory=set)  # delivered the barrier or ended


class BarrierTracker(CheckpointBarrierHandler):
    """Flink: CheckpointBarrierTracker (AT_LEAST_ONCE) -- counts barriers, never blocks."""

    def __init__(
        self,
        num_channels: int,
        gate: BlockableGate,
        on_checkpoint: OnCheckpoint,
        on_abort: OnAbort,
        clock: Callable[[], float] = time.monotonic,
        *,
        logger: Logger | None = None,
    ) -> None:
        super().__init__(num_channels, gate, on_checkpoint, on_abort, clock, logger=logger)
        self._pending: dict[int, _PendingCount] = {}  # by id, ascending (ids only grow)

    @property
    def pending_checkpoint_id(self) -> int | None:
        return next(reversed(self._pending), None) if self._pending else None

    @property
    def pending_checkpoint_ids(self) -> list[int]:
        return list(self._pending)

    def process_barrier(self, channel: int, barrier: CheckpointBarrier) -> None:
        self._check_channel(channel)
        if self._ended[channel]:
            return
        cid = barrier.checkpoint_id
        count = self._pending.get(cid)
        if count is None:
            if cid <= self._newest_id:
                return  # triggered, subsumed or aborted already
            self._newest_id = cid
            ended = {i for i, e in enumerate(self._ended) if e} if self._num_ended else set()
            count = self._pending[cid] = _PendingCount(barrier, self._clock(), ended)
            if len(self._pending) > MAX_TRACKED_CHECKPOINTS:
                oldest = next(iter(self._pending))
                del self._pending[oldest]
                self._abort_one(oldest, f"more than {MAX_TRACKED_CHECKPOINTS} checkpoints in progress")
        count.channels.add(channel)
        if len(count.channels) == self.num_channels:
            self._trigger(cid)

    def abort_pending(self, reason: str) -> None:
        pending, self._pending = self._pending, {}
        for cid in pending:
            self._abort_one(cid, reason)

    def _start_without_barrier(self, barrier: CheckpointBarrier) -> None:
        cid = barrier.checkpoint_id
        self._newest_id = cid
        ended = {i for i, e in enumerate(self._ended) if e}
        self._pending[cid] = _PendingCount(barrier, self._clock(), ended)
        if len(ended) == self.num_channels:
            self._trigger(cid)

    def _on_channel_ended(self, channel: int) -> None:
        complete = None
        for cid, count in self._pending.items():
            count.channels.add(channel)
            if len(count.channels) == self.num_channels:
                complete = cid  # why: ascending, so this ends as the newest complete one
        if complete is not None:
            self._trigger(complete)

    def _trigger(self, cid: int) -> None:
        count = self._pending.pop(cid)
        older = [i for i in self._pending if i < cid]
        for i in older:
            del self._pending[i]
        for i in older:
            self._abort_one(i, f"subsumed: the newer checkpoint {cid} completed first")
        self._last_alignment_ms = self._elapsed_ms(count.started)
        self._on_checkpoint(count.barrier)

    def _abort_one(self, cid: int, reason: str) -> None:
        self._log.debug("checkpoint %d aborted: %s", cid, reason)
        self._on_abort(cid, reason)


def create_barrier_handler(
    mode: CheckpointingMode,
    num_channels: int,
    gate: BlockableGate,
    on_checkpoint: OnCheckpoint,
    on_abort: OnAbort,
    clock: Callable[[], float] = time.monotonic,
    *,
    logger: Logger | None = None,
) -> CheckpointBarrierHandler:
    """The handler for a checkpointing mode: aligned for EXACTLY_ONCE, a tracker for AT_LEAST_ONCE."""
    mode = CheckpointingMode(mode)
    cls: type[CheckpointBarrierHandler] = (
        AlignedBarrierHandler if mode is CheckpointingMode.EXACTLY_ONCE else BarrierTracker
    )
    return cls(num_channels, gate, on_checkpoint, on_abort, clock, logger=logger)
