"""The consuming side: an InputGate over input channels, read by one task thread.

Flink: SingleInputGate, InputChannel, LocalInputChannel. Channels tell the gate when they go
from empty to non-empty (Flink's notifyChannelNonEmpty); the gate keeps a queue of channels
with data and the task thread blocks on a condition until one is there -- never spinning.
The remote channel lives in client.py.

Channel blocking (for aligned, exactly-once checkpoints; Flink: CheckpointedInputGate blocking a
channel after its barrier, InputChannel.blockConsumption/resumeConsumption): a blocked channel is
kept out of the queue of channels with data, so the task thread takes nothing from it until it is
unblocked. Its data stays where it is: a local producer's bounded subpartition fills and the
producer blocks; a remote channel announces no credit (credit is only returned when the task
thread takes a batch), so the remote producer's subpartition fills and it blocks. Nothing buffers
without bound. Blocking costs the hot path nothing: poll_next is unchanged, and a notification
for a blocked channel is only remembered (the channel stays "queued") until it is unblocked.
"""
from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections import deque

from runtime.core.records import EndOfPartition, StreamElement
from runtime.taskmanager.network.errors import PartitionError, PartitionNotFoundError
from runtime.taskmanager.network.partition import (
    DEFAULT_PARTITION_REQUEST_TIMEOUT_S,
    ResultPartition,
    ResultPartitionID,
    ResultPartitionManager,
    SubpartitionView,
)

log = logging.getLogger(__name__)


class InputChannel(ABC):
    """One (partition, subpartition) this gate reads. Flink: InputChannel."""

    def __init__(self, gate: InputGate, index: int, rpid: ResultPartitionID, subpartition: int) -> None:
        self.gate = gate
        self.index = index
        self.rpid = rpid
        self.subpartition = subpartition
        self.finished = False  # the task thread took EndOfPartition (gate lock)
        # has data to look at: in the gate's queue of channels with data, or, while blocked, held
        # back until unblocked (gate lock)
        self._queued = False
        self._blocked = False  # the task thread takes nothing from it until unblocked (gate lock)

    @abstractmethod
    def request(self) -> None:
        """Start requesting the subpartition (asynchronously: never blocks the caller)."""

    @abstractmethod
    def get_next(self) -> tuple[StreamElement | None, bool]:
        """Task thread: (next element or None, whether more is available). May raise."""

    def check_request_timeout(self, now: float) -> None:
        """Raise if the partition request has been pending for too long (default: never)."""

    @property
    def request_deadline(self) -> float | None:
        """When a pending request times out on the task thread (None: not timed here)."""
        return None

    @abstractmethod
    def close(self) -> None:
        """Stop reading (cancel or end); idempotent."""

    def notify_available(self) -> None:
        self.gate._notify_channel_non_empty(self)

    def notify_error(self, error: BaseException) -> None:
        self.gate._notify_error(self, error)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(#{self.index} {self.rpid}[{self.subpartition}])"


class LocalInputChannel(InputChannel):
    """Flink: LocalInputChannel -- reads the producer's element objects straight from its
    subpartition in this process (no serialization, no copy)."""

    def __init__(
        self,
        gate: InputGate,
        index: int,
        rpid: ResultPartitionID,
        subpartition: int,
        manager: ResultPartitionManager,
        request_timeout_s: float = DEFAULT_PARTITION_REQUEST_TIMEOUT_S,
    ) -> None:
        super().__init__(gate, index, rpid, subpartition)
        self._manager = manager
        self._timeout = request_timeout_s
        self._deadline: float | None = None
        self._view: SubpartitionView | None = None
        self._unsubscribe = lambda: None
        self._closed = False

    def request(self) -> None:
        self._deadline = time.monotonic() + self._timeout
        self._unsubscribe = self._manager.subscribe(self.rpid, self._on_registered)

    def _on_registered(self, partition: ResultPartition) -> None:
        # runs on the registering (producer) thread or on the caller of request()
        if self._closed:
            return
        try:
            view = partition.create_view(self.subpartition, self._on_view_notification)
        except PartitionError as e:
            self.notify_error(e)
            return
        self._view = view
        if view.is_available():
            self.notify_available()

    def _on_view_notification(self) -> None:
        # producer (or releasing) thread: data arrived, or the partition failed/was released
        view = self._view
        if view is not None and view.partition.is_released:
            # why: raise it on the task thread now, also while this channel is blocked for
            # alignment (its data would not be looked at until the alignment ends)
            self.notify_error(view.partition.consumer_error())
        else:
            self.notify_available()

    def check_request_timeout(self, now: float) -> None:
        if self._view is None and self._deadline is not None and now > self._deadline and not self._closed:
            raise PartitionNotFoundError(
                f"local partition {self.rpid} (subpartition {self.subpartition}) was not registered "
                f"within {self._timeout:.1f}s",
                self.rpid.partition_id,
            )

    @property
    def request_deadline(self) -> float | None:
        return None if self._view is not None else self._deadline

    def get_next(self) -> tuple[StreamElement | None, bool]:
        view = self._view
        if view is None:
            return None, False
        return view.poll()

    def close(self) -> None:
        self._closed = True
        self._unsubscribe()
        if self._view is not None:
            self._view.release()


class InputGate:
    """Flink: SingleInputGate -- all channels of one input of one task, read by its thread."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.channels: list[InputChannel] = []
        self._cond = threading.Condition(threading.Lock())
        self.wait_ns = 0  # time the consuming thread waited for input (the task's idle time; read by metrics)
        self._available: deque[InputChannel] = deque()
        self._error: BaseException | None = None
        self._num_finished = 0
        self._blocked: list[InputChannel] = []
        self._closed = False
        self._requested = False

    def set_channels(self, channels: list[InputChannel]) -> None:
        if self._requested:
            raise RuntimeError(f"input gate {self.name}: channels already requested")
        for i, ch in enumerate(channels):
            if ch.index != i or ch.gate is not self:
                raise ValueError(f"input gate {self.name}: channel {ch!r} is not channel {i} of this gate")
        self.channels = list(channels)

    @property
    def num_channels(self) -> int:
        return len(self.channels)

    def request_partitions(self) -> None:
        """Flink: requestPartitions -- every channel starts requesting its subpartition."""
        if self._requested:
            return
        self._requested = True
        for ch in self.channels:
            ch.request()

    @property
    def is_finished(self) -> bool:
        """Every channel delivered its EndOfPartition."""
        return self._num_finished == len(self.channels)

    # ---- notifications (any thread) -----------------------------------------------------------
    def _notify_channel_non_empty(self, ch: InputChannel) -> None:
        with self._cond:
            if ch._queued or ch.finished or self._closed:
                return
            ch._queued = True
            if ch._blocked:
                return  # remembered: unblocking queues it
            self._available.append(ch)
            self._cond.notify()

    def _notify_error(self, ch: InputChannel, error: BaseException) -> None:
        with self._cond:
            if ch.finished or self._closed:
                return
            if self._error is None:
                self._error = error
            self._cond.notify_all()

    # ---- task thread --------------------------------------------------------------------------
    def poll_next(self, timeout: float) -> tuple[int, StreamElement] | None:
        """The next (channel index, element), waiting up to `timeout` seconds; None on timeout
        or when the gate is finished/closed. Raises a PartitionError (naming the partition) when
        a producer failed, a partition was released or not found, or a connection was lost."""
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                while True:
                    if self._error is not None:
                        raise self._error
                    if self._closed or self.is_finished:
                        return None
                    if self._available:
                        ch = self._available.popleft()
                        ch._queued = False
                        break
                    now = time.monotonic()
                    wake = deadline
                    for c in self.channels:  # pending local requests time out on this thread
                        d = c.request_deadline
                        if d is not None:
                            c.check_request_timeout(now)
                            wake = min(wake, d + 0.001)
                    if now >= deadline:
                        return None
                    waited = time.monotonic_ns()
                    self._cond.wait(wake - now)
                    self.wait_ns += time.monotonic_ns() - waited
            try:
                element, more = ch.get_next()
            except BaseException as e:
                with self._cond:
                    if self._error is None:
                        self._error = e
                raise
            if element is None:
                continue  # spurious notification (e.g. a view attached while data was taken)
            if type(element) is EndOfPartition:
                with self._cond:
                    ch.finished = True
                    self._num_finished += 1
                ch.close()
            elif more:
                self._notify_channel_non_empty(ch)
            return ch.index, element

    # ---- channel blocking (task thread) -------------------------------------------------------
    def block_channel(self, index: int) -> None:
        """Take nothing more from channel `index` until it is unblocked (idempotent). Its data
        waits in the channel (which backpressures its producer)."""
        ch = self.channels[index]
        with self._cond:
            if ch._blocked:
                return
            ch._blocked = True
            self._blocked.append(ch)
            if ch._queued:
                try:
                    self._available.remove(ch)  # O(channels), once per channel and checkpoint
                except ValueError:
                    pass  # why: close() cleared the queue
                # still _queued: it has data to look at once unblocked

    def unblock_channel(self, index: int) -> None:
        """Let the task thread read channel `index` again; queued if it has data."""
        ch = self.channels[index]
        with self._cond:
            if not ch._blocked:
                return
            self._blocked.remove(ch)
            self._unblock_locked(ch)

    def unblock_all(self) -> None:
        """Unblock every blocked channel (in the order they were blocked)."""
        with self._cond:
            blocked, self._blocked = self._blocked, []
            for ch in blocked:
                self._unblock_locked(ch)

    def _unblock_locked(self, ch: InputChannel) -> None:
        ch._blocked = False
        if ch._queued and not ch.finished and not self._closed:
            self._available.append(ch)
            self._cond.notify()

    def is_blocked(self, index: int) -> bool:
        return self.channels[index]._blocked

    @property
    def num_blocked(self) -> int:
        return len(self._blocked)

    def close(self) -> None:
        """Release every channel (cancels remote requests); poll_next then returns None."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._available.clear()
            self._cond.notify_all()
        for ch in self.channels:
            try:
                ch.close()
            except Exception:
                log.exception("input gate %s: closing %r failed", self.name, ch)

    def __repr__(self) -> str:
        return f"InputGate({self.name}, channels={len(self.channels)})"
