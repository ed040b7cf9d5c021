"""Result partitions: bounded per-subpartition queues of element objects, plus their registry.

Flink: ResultPartition / PipelinedResultPartition, PipelinedSubpartition,
PipelinedSubpartitionView and ResultPartitionManager.

A subpartition queue holds element objects (no serialization): a local consumer takes them as
they are, the data server encodes them only when it sends them to another process.
Backpressure: a record batch counts as one buffer; `add` of a batch blocks the producing task
thread while the subpartition already holds `capacity` un-consumed batches (Flink: the producer
waiting for a free buffer of its LocalBufferPool). Events (watermarks, barriers, end of partition)
never block, like Flink's unpooled event buffers, so finish/cancel can never deadlock.
"""
from __future__ import annotations

import asyncio
import enum
import logging
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from runtime.core.records import END_OF_PARTITION, EndOfPartition, RecordBatch, StreamElement
from runtime.taskmanager.network.errors import (
    PartitionError,
    PartitionNotFoundError,
    PartitionReleasedError,
    ProducerFailedError,
)

log = logging.getLogger(__name__)

DEFAULT_CAPACITY_PER_SUBPARTITION = 4
DEFAULT_PARTITION_REQUEST_TIMEOUT_S = 30.0

AvailabilityListener = Callable[[], None]


@dataclass(frozen=True, slots=True)
class ResultPartitionID:
    """Flink: ResultPartitionID -- the partition plus the producer attempt that writes it, so a
    restarted producer is a new partition and a consumer never reads a stale attempt's data."""

    partition_id: str
    producer_attempt_id: str

    def __str__(self) -> str:
        return f"{self.partition_id}@{self.producer_attempt_id}"


def estimate_nbytes(batch: RecordBatch) -> int:
    """Size of a record batch for the bytes-in/out metrics, without serializing it.

    Exact for columnar batches (numpy buffers); for object batches the records times the size of
    the first record and its direct members (a cheap estimate: one record is inspected per batch).
    """
    ts = batch.timestamps
    n = 0 if ts is None else ts.nbytes
    columns = getattr(batch, "columns", None)
    if columns is not None:
        for col in columns.values():
            n += col.nbytes
        return n
    values = getattr(batch, "values", None)
    if not values:
        return n
    first = values[0]
    size = sys.getsizeof(first)
    members = getattr(first, "_values", first)  # a Row keeps its fields in _values
    if isinstance(members, (tuple, list)):
        size += sum(sys.getsizeof(v) for v in members[:64])
    elif isinstance(members, dict):
        size += sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in list(members.items())[:64])
    return n + size * len(values)


class _State(enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"  # EndOfPartition enqueued everywhere; data may still be queued
    FAILED = "failed"
    RELEASED = "released"


class _Subpartition:
    """Flink: PipelinedSubpartition (the queue; guarded by the owning partition's lock)."""

    __slots__ = ("index", "queue", "backlog", "not_full", "waiters", "view", "consumed")

    def __init__(self, index: int, lock: threading.Lock) -> None:
        self.index = index
        self.queue: deque[StreamElement] = deque()
        self.backlog = 0  # queued record batches (events excluded)
        self.not_full = threading.Condition(lock)
        self.waiters = 0
        self.view: SubpartitionView | None = None
        self.consumed = False  # the reader took EndOfPartition


class ResultPartition:
    """Flink: ResultPartition (pipelined, bounded). Producer side used by one task thread."""

    defers_watermarks = False  # every watermark goes downstream in order (see BlockingResultPartition)

    def __init__(
        self,
        partition_id: str,
        num_subpartitions: int,
        capacity_per_subpartition: int = DEFAULT_CAPACITY_PER_SUBPARTITION,
        producer_attempt_id: str = "",
    ) -> None:
        if num_subpartitions < 1:
            raise ValueError(f"partition {partition_id} needs at least one subpartition")
        if capacity_per_subpartition < 1:
            raise ValueError(f"capacity_per_subpartition must be >= 1, got {capacity_per_subpartition}")
        self.id = ResultPartitionID(partition_id, producer_attempt_id)
        self.num_subpartitions = num_subpartitions
        self.capacity = capacity_per_subpartition
        self._lock = threading.Lock()
        self._subs = [_Subpartition(i, self._lock) for i in range(num_subpartitions)]
        self._state = _State.RUNNING
        self._cause: BaseException | None = None
        self._num_consumed = 0
        self._dispose_hooks: list[Callable[[ResultPartition], None]] = []
        # metrics, read by the TaskExecutor's thread (plain ints: a read never tears)
        self.bytes_out = 0  # estimated in-memory size of the record batches added (see estimate_nbytes)
        self._backpressured_ns = 0  # time the producer spent blocked in add() waiting for room
        self._blocked_since_ns = 0  # start of the wait in progress, 0 while not waiting

    @property
    def partition_id(self) -> str:
        return self.id.partition_id

    # ---- status -------------------------------------------------------------------------------
    @property
    def is_finished(self) -> bool:
        return self._state is _State.FINISHED

    @property
    def is_released(self) -> bool:
        return self._state in (_State.RELEASED, _State.FAILED)

    @property
    def failure_cause(self) -> BaseException | None:
        return self._cause

    def backlog(self, subpartition: int) -> int:
        """Queued, un-consumed record batches of one subpartition."""
        with self._lock:
            return self._subs[subpartition].backlog

    def backpressured_ns(self) -> int:
        """Total time the producer has waited for room so far, including a wait in progress
        (Flink: backPressuredTimeMsPerSecond's counter)."""
        since = self._blocked_since_ns
        ongoing = time.monotonic_ns() - since if since else 0
        return self._backpressured_ns + max(0, ongoing)

    def is_producer_blocked(self, subpartition: int | None = None) -> bool:
        """Whether the producer thread is waiting for room (in `subpartition`, or in any)."""
        with self._lock:
            subs = self._subs if subpartition is None else [self._subs[subpartition]]
            return any(s.waiters for s in subs)

    def consumer_error(self) -> PartitionError:
        """What a reader of this failed or released partition gets (as `SubpartitionView.poll` raises)."""
        with self._lock:
            return self._error_locked()

    def _error_locked(self) -> PartitionError:
        if self._state is _State.FAILED:
            return ProducerFailedError(
                f"producer of partition {self.id} failed: {self._cause!r}", self.id.partition_id
            )
        return PartitionReleasedError(
            f"partition {self.id} was released"
            + (f": {self._cause!r}" if self._cause is not None else ""),
            self.id.partition_id,
        )

    # ---- producer side ------------------------------------------------------------------------
    def has_capacity(self, subpartition: int) -> bool:
        with self._lock:
            return self._subs[subpartition].backlog < self.capacity

    def add(self, subpartition: int, element: StreamElement) -> None:
        """Enqueue; for a record batch, block while the subpartition is full (backpressure)."""
        self._add(subpartition, element, block=True)

    def try_add(self, subpartition: int, element: StreamElement) -> bool:
        """Enqueue only if it would not block (used by the output flusher, which must not wait)."""
        return self._add(subpartition, element, block=False)

    def _add(self, subpartition: int, element: StreamElement, block: bool) -> bool:
        if isinstance(element, RecordBatch):
            data, nbytes = True, estimate_nbytes(element)
        else:
            data, nbytes = False, 0
        with self._lock:
            sp = self._subs[subpartition]
            if data and sp.backlog >= self.capacity and self._state is _State.RUNNING:
                if not block:
                    return False
                sp.waiters += 1
                # only this (blocking) branch is timed, so the fast path pays nothing for backpressure metrics
                started = self._blocked_since_ns = time.monotonic_ns()
                try:
                    # why: no timeout/polling -- consumption, release and fail all notify
                    while sp.backlog >= self.capacity and self._state is _State.RUNNING:
                        sp.not_full.wait()
                finally:
                    sp.waiters -= 1
                    self._backpressured_ns += time.monotonic_ns() - started
                    self._blocked_since_ns = 0
            if self._state is not _State.RUNNING:
                if self._state is _State.FINISHED:
                    raise PartitionError(f"partition {self.id} is already finished", self.id.partition_id)
                raise self._error_locked()
            was_empty = not sp.queue
            sp.queue.append(element)
            if data:
                sp.backlog += 1
                self.bytes_out += nbytes  # under the lock: the flusher thread adds too (try_add)
            view = sp.view
            listener = view.listener if (was_empty and view is not None and not view.released) else None
        if listener is not None:
            listener()
        return True

    def broadcast(self, element: StreamElement) -> None:
        """The same element into every subpartition (in subpartition order)."""
        for i in range(self.num_subpartitions):
            self.add(i, element)

    def finish(self) -> None:
        """Flink: ResultPartition.finish -- EndOfPartition into every subpartition."""
        listeners: list[AvailabilityListener] = []
        with self._lock:
            if self._state is not _State.RUNNING:
                if self._state is _State.FINISHED:
                    return
                raise self._error_locked()
            for sp in self._subs:
                if not sp.queue and sp.view is not None:
                    listeners.append(sp.view.listener)
                sp.queue.append(END_OF_PARTITION)
            self._state = _State.FINISHED
        for listener in listeners:
            listener()
        log.debug("partition %s finished", self.id)

    def fail(self, cause: BaseException | None) -> None:
        """Flink: ResultPartition.fail -- discard data; consumers see ProducerFailedError."""
        self._terminate(_State.FAILED, cause)

    def release(self, cause: BaseException | None = None) -> None:
        """Discard data, wake a blocked producer (its add raises) and tell the readers."""
        self._terminate(_State.RELEASED, cause)

    def _terminate(self, state: _State, cause: BaseException | None) -> None:
        listeners: list[AvailabilityListener] = []
        with self._lock:
            if self._state in (_State.FAILED, _State.RELEASED):
                return
            all_consumed = self._num_consumed == self.num_subpartitions
            self._state = state
            self._cause = cause
            for sp in self._subs:
                sp.queue.clear()
                sp.backlog = 0
                sp.not_full.notify_all()
                if sp.view is not None and not sp.consumed:
                    listeners.append(sp.view.listener)
            hooks = list(self._dispose_hooks)
        if state is _State.FAILED or not all_consumed:
            log.info("partition %s %s%s", self.id, state.value, f": {cause!r}" if cause else "")
        for listener in listeners:
            listener()
        for hook in hooks:
            hook(self)

    # ---- consumer side ------------------------------------------------------------------------
    def create_view(self, subpartition: int, listener: AvailabilityListener) -> SubpartitionView:
        """Flink: createSubpartitionView -- the single reader of one subpartition.

        `listener` is called (from the producer's or releasing thread, without locks held)
        whenever the subpartition goes from empty to non-empty, and on fail/release. It is not
        called for data queued before the view existed: the caller attaches the view, then
        checks `view.is_available()` (so a notification can never arrive before it is ready).
        """
        if not 0 <= subpartition < self.num_subpartitions:
            raise PartitionError(
                f"partition {self.id} has {self.num_subpartitions} subpartitions, "
                f"subpartition {subpartition} requested",
                self.id.partition_id,
            )
        with self._lock:
            if self._state in (_State.FAILED, _State.RELEASED):
                raise self._error_locked()
            sp = self._subs[subpartition]
            if sp.view is not None:
                # Flink: PipelinedSubpartition.createReadView -- a pipelined subpartition can be
                # consumed only once; a restarted consumer needs a restarted producer attempt
                raise PartitionError(
                    f"subpartition {subpartition} of {self.id} is being (or has been) consumed; "
                    "pipelined subpartitions can only be consumed once",
                    self.id.partition_id,
                )
            view = SubpartitionView(self, sp, listener)
            sp.view = view
        return view

    def _on_dispose(self, hook: Callable[[ResultPartition], None]) -> None:
        self._dispose_hooks.append(hook)

    def __repr__(self) -> str:
        return f"ResultPartition({self.id}, subpartitions={self.num_subpartitions}, {self._state.value})"


class SubpartitionView:
    """Flink: PipelinedSubpartitionView -- non-blocking reads from one subpartition."""

    __slots__ = ("partition", "_sp", "listener", "released")

    def __init__(self, partition: ResultPartition, sp: _Subpartition, listener: AvailabilityListener) -> None:
        self.partition = partition
        self._sp = sp
        self.listener = listener
        self.released = False

    @property
    def subpartition_index(self) -> int:
        return self._sp.index

    def poll(self, data_allowed: bool = True) -> tuple[StreamElement | None, bool]:
        """(next element or None, whether more is queued). Raises if the producer failed or the
        partition was released. With `data_allowed=False` (no credit) only an event is taken."""
        p = self.partition
        sp = self._sp
        fully_consumed = False
        with p._lock:
            if p._state in (_State.FAILED, _State.RELEASED) and not sp.consumed:
                raise p._error_locked()
            q = sp.queue
            if self.released or not q:
                return None, False
            head = q[0]
            if isinstance(head, RecordBatch):
                if not data_allowed:
                    return None, True
                q.popleft()
                sp.backlog -= 1
                if sp.waiters:
                    sp.not_full.notify()
            else:
                q.popleft()
                if type(head) is EndOfPartition:
                    sp.consumed = True
                    self.released = True
                    p._num_consumed += 1
                    fully_consumed = p._num_consumed == p.num_subpartitions
            more = bool(q)
        if fully_consumed:
            # why: Flink releases a pipelined partition once every subpartition was consumed
            p.release()
        return head, more

    def is_available(self, data_allowed: bool = True) -> bool:
        with self.partition._lock:
            if self.partition._state in (_State.FAILED, _State.RELEASED) and not self._sp.consumed:
                return True  # the error is "available"
            q = self._sp.queue
            return bool(q) and (data_allowed or not isinstance(q[0], RecordBatch))

    def release(self) -> None:
        """The reader went away (consumer canceled). The producer keeps its data until the
        partition is released (a pipelined subpartition is never read twice)."""
        with self.partition._lock:
            self.released = True


class ResultPartitionManager:
    """Flink: ResultPartitionManager -- partitions of this TaskManager by ResultPartitionID.

    Thread-safe. A request for a partition that is not registered yet waits for it (the
    consumer may be deployed before its producer registers), up to a timeout.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: dict[ResultPartitionID, ResultPartition] = {}
        self._subscribers: dict[ResultPartitionID, list[Callable[[ResultPartition], None]]] = {}

    def register(self, partition: ResultPartition) -> None:
        with self._lock:
            if partition.id in self._partitions:
                raise PartitionError(f"partition {partition.id} is already registered", partition.partition_id)
            self._partitions[partition.id] = partition
            subscribers = self._subscribers.pop(partition.id, [])
        partition._on_dispose(self._dispose)
        log.debug("registered partition %s", partition.id)
        for cb in subscribers:
            cb(partition)

    def _dispose(self, partition: ResultPartition) -> None:
        with self._lock:
            if self._partitions.get(partition.id) is partition:
                del self._partitions[partition.id]

    def get(self, rpid: ResultPartitionID) -> ResultPartition | None:
        with self._lock:
            return self._partitions.get(rpid)

    def partitions(self) -> list[ResultPartition]:
        with self._lock:
            return list(self._partitions.values())

    def awaited(self) -> list[ResultPartitionID]:
        """Partitions requested before they were registered: consumers wait for them."""
        with self._lock:
            return list(self._subscribers)

    def subscribe(self, rpid: ResultPartitionID, callback: Callable[[ResultPartition], None]) -> Callable[[], None]:
        """Call `callback(partition)` now if registered, else from the registering thread.
        Returns a function that cancels the subscription."""
        with self._lock:
            partition = self._partitions.get(rpid)
            if partition is None:
                self._subscribers.setdefault(rpid, []).append(callback)
        if partition is not None:
            callback(partition)
            return lambda: None

        def cancel() -> None:
            with self._lock:
                subs = self._subscribers.get(rpid)
                if subs and callback in subs:
                    subs.remove(callback)
                    if not subs:
                        del self._subscribers[rpid]

        return cancel

    async def wait_for(
        self, rpid: ResultPartitionID, timeout: float = DEFAULT_PARTITION_REQUEST_TIMEOUT_S
    ) -> ResultPartition:
        """Asyncio-friendly: the partition, once registered; PartitionNotFoundError on timeout."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ResultPartition] = loop.create_future()

        def set_result(p: ResultPartition) -> None:
            if not fut.done():
                fut.set_result(p)

        def resolve(p: ResultPartition) -> None:
            # why: register() may run on any thread (a task thread creating its partition)
            try:
                loop.call_soon_threadsafe(set_result, p)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        cancel = self.subscribe(rpid, resolve)
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise PartitionNotFoundError(
                f"partition {rpid} was not registered within {timeout:.1f}s: its producer was not "
                "deployed on this TaskManager, or failed before registering",
                rpid.partition_id,
            ) from None
        finally:
            cancel()

    def release_partitions_of(self, producer_attempt_id: str, cause: BaseException | None = None) -> int:
        """Release every partition written by one producer attempt; returns how many."""
        with self._lock:
            victims = [p for p in self._partitions.values() if p.id.producer_attempt_id == producer_attempt_id]
        for p in victims:
            p.release(cause)
        return len(victims)

    def release_all(self) -> None:
        for p in self.partitions():
            p.release()
