"""RecordWriter: partitions batches into a ResultPartition, coalescing small ones.

Flink: RecordWriter / ChannelSelectorRecordWriter / BroadcastRecordWriter and
RecordWriter.OutputFlusher. Flink fills network buffers record by record and flushes a partly
filled buffer when the buffer timeout fires; here the "buffer" of a channel is a pending list of
small batches that is concatenated (runtime.core.records.concat_batches) into one batch when it
reaches `buffer_records` rows, when an event is broadcast, on flush, or on the periodic flush.
"""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Protocol, cast

from runtime.core.records import ColumnBatch, RecordBatch, StreamElement, Watermark, WatermarkStatus, concat_batches
from runtime.taskmanager.network.errors import PartitionError
from runtime.taskmanager.network.partition import ResultPartitionID
from runtime.taskmanager.network.partitioners import StreamPartitioner

log = logging.getLogger(__name__)

DEFAULT_BUFFER_RECORDS = 8192
DEFAULT_BUFFER_TIMEOUT_S = 0.1  # Flink's execution.buffer-timeout default (100 ms)


class OutputPartition(Protocol):
    """What a RecordWriter writes into: a ResultPartition, or a BlockingResultPartition (which
    defers watermarks: see `WatermarkDeferringPartition`)."""

    @property
    def id(self) -> ResultPartitionID: ...

    @property
    def partition_id(self) -> str: ...

    @property
    def num_subpartitions(self) -> int: ...

    @property
    def defers_watermarks(self) -> bool: ...

    @property
    def is_released(self) -> bool: ...

    def has_capacity(self, subpartition: int) -> bool: ...

    def add(self, subpartition: int, element: StreamElement) -> None: ...

    def try_add(self, subpartition: int, element: StreamElement) -> bool: ...

    def finish(self) -> None: ...


class WatermarkDeferringPartition(OutputPartition, Protocol):
    """A partition whose `defers_watermarks` is true: it keeps the last watermark itself."""

    def note_watermark(self, watermark: Watermark) -> None: ...


def _compatible(a: RecordBatch, b: RecordBatch) -> bool:
    """Whether two batches can be concatenated without changing types or losing timestamps."""
    if type(a) is not type(b) or (a.timestamps is None) != (b.timestamps is None):
        return False
    if isinstance(a, ColumnBatch) and isinstance(b, ColumnBatch):  # both or neither: their types are equal
        ca, cb = a.columns, b.columns
        if ca.keys() != cb.keys():
            return False
        return all(ca[k].dtype == cb[k].dtype for k in ca)
    return True


class OutputFlusher:
    """Flink: RecordWriter.OutputFlusher, shared by every writer of a TaskManager: one daemon
    thread that, every `interval_s`, moves pending partial buffers into their subpartitions.

    It never blocks on a busy writer (try-lock) or a full subpartition (try_add), so one
    backpressured writer cannot delay the others.
    """

    def __init__(self, interval_s: float = DEFAULT_BUFFER_TIMEOUT_S, name: str = "output-flusher") -> None:
        if interval_s <= 0:
            raise ValueError(f"flush interval must be > 0, got {interval_s}")
        self.interval_s = interval_s
        self._name = name
        self._writers: weakref.WeakSet[RecordWriter] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def register(self, writer: RecordWriter) -> None:
        with self._lock:
            self._writers.add(writer)
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def unregister(self, writer: RecordWriter) -> None:
        with self._lock:
            self._writers.discard(writer)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                writers = list(self._writers)
            for w in writers:
                try:
                    w.try_flush()
                except Exception:  # why: one broken writer must not stop flushing the others
                    log.exception("periodic flush of %s failed", w)

    def stop(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)


class RecordWriter:
    """Writes one task's output into one ResultPartition. Used by one task thread; the flusher
    thread only ever touches it through `try_flush`."""

    def __init__(
        self,
        partition: OutputPartition,
        partitioner: StreamPartitioner,
        buffer_records: int = DEFAULT_BUFFER_RECORDS,
        flusher: OutputFlusher | None = None,
        flush_always: bool = False,
    ) -> None:
        if partitioner.num_channels != partition.num_subpartitions:
            raise ValueError(
                f"partitioner has {partitioner.num_channels} channels but partition {partition.id} "
                f"has {partition.num_subpartitions} subpartitions"
            )
        if buffer_records < 1:
            raise ValueError(f"buffer_records must be >= 1, got {buffer_records}")
        self.partition = partition
        self.partitioner = partitioner
        self.buffer_records = buffer_records
        self.flush_always = flush_always  # Flink: buffer timeout 0
        n = partition.num_subpartitions
        self._pending: list[list[RecordBatch]] = [[] for _ in range(n)]
        self._pending_rows = [0] * n
        self._lock = threading.Lock()
        self._closed = False
        self._flusher = flusher
        self.num_records_out = 0
        self.num_buffers_out = 0
        if flusher is not None:
            flusher.register(self)

    # ---- task thread --------------------------------------------------------------------------
    def emit(self, batch: RecordBatch) -> None:
        """Partition `batch` and buffer it; may block under backpressure."""
        n = len(batch)
        if n == 0:
            return
        with self._lock:
            self._check_open()
            self.num_records_out += n
            for ch, part in enumerate(self.partitioner.select(batch)):
                if part is not None:
                    self._append(ch, part)
            if self.flush_always:
                self._flush_locked()

    def broadcast_event(self, event: StreamElement) -> None:
        """Put `event` (a watermark, a checkpoint barrier, ...) into every subpartition, each
        right after that subpartition's pending records (Flink: RecordWriter.broadcastEvent).

        An event never overtakes a record emitted before it, and it is enqueued now, not at the
        next buffer timeout: events take no buffer, so a consumer is notified at once and a
        remote one gets it without credit. Subpartition by subpartition, so when moving the
        pending records of one subpartition waits under backpressure, the subpartitions before
        it already carry the event (a barrier starts the consumers' alignment as early as it can).
        """
        with self._lock:
            self._check_open()
            partition = self.partition
            if type(event) is WatermarkStatus and partition.defers_watermarks:
                return  # a blocking result is read after its producer ended: idleness means nothing there
            if type(event) is Watermark and partition.defers_watermarks:
                # a blocking partition keeps only the last watermark, written after every record:
                # records stay buffered (moving them now would cut them into small batches)
                cast(WatermarkDeferringPartition, partition).note_watermark(event)
                return
            for ch, pend in enumerate(self._pending):
                if pend:
                    self._move(ch)
                partition.add(ch, event)

    def flush_all(self) -> None:
        with self._lock:
            self._check_open()
            self._flush_locked()

    def finish(self) -> None:
        """End of input: flush, put EndOfPartition everywhere, stop periodic flushing."""
        self.flush_all()
        self.partition.finish()
        self.close()

    def close(self) -> None:
        """Stop periodic flushing; pending data not flushed before is dropped (cancel path)."""
        if self._flusher is not None:
            self._flusher.unregister(self)
        self._closed = True

    # ---- flusher thread -----------------------------------------------------------------------
    def try_flush(self) -> None:
        """Move pending data where it fits without waiting; skip if the task thread is busy."""
        if not self._lock.acquire(blocking=False):
            return  # the task thread is emitting (or blocked on backpressure): it moves data itself
        try:
            if self._closed or self.partition.is_released:
                return
            for ch, pend in enumerate(self._pending):
                if pend and self.partition.has_capacity(ch):
                    merged = concat_batches(pend)
                    # only this writer adds to the partition, so the room seen above is still there
                    if self.partition.try_add(ch, merged):
                        self._clear(ch)
                        self.num_buffers_out += 1
                    else:
                        self._pending[ch] = [merged]
        except PartitionError:
            pass  # released/failed: the task thread sees it on its next call
        finally:
            self._lock.release()

    # ---- internals (writer lock held) ---------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise PartitionError(f"record writer of {self.partition.id} is closed", self.partition.partition_id)

    def _clear(self, ch: int) -> None:
        self._pending[ch] = []
        self._pending_rows[ch] = 0

    def _append(self, ch: int, part: RecordBatch) -> None:
        pend = self._pending[ch]
        if pend and not _compatible(pend[0], part):
            self._move(ch)
            pend = self._pending[ch]
        n = len(part)
        if n >= self.buffer_records:
            # why: a big batch is a full buffer by itself; concatenating would copy it for nothing
            if pend:
                self._move(ch)
            self.partition.add(ch, part)
            self.num_buffers_out += 1
            return
        pend.append(part)
        self._pending_rows[ch] += n
        if self._pending_rows[ch] >= self.buffer_records:
            self._move(ch)

    def _move(self, ch: int) -> None:
        pend = self._pending[ch]
        self._clear(ch)
        self.partition.add(ch, concat_batches(pend))
        self.num_buffers_out += 1

    def _flush_locked(self) -> None:
        for ch, pend in enumerate(self._pending):
            if pend:
                self._move(ch)

    def pending_rows(self, channel: int) -> int:
        return self._pending_rows[channel]

    def __repr__(self) -> str:
        return f"RecordWriter({self.partition.id}, {self.partitioner!r})"
