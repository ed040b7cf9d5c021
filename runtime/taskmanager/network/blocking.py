"""Blocking exchanges: a producer writes its subpartitions to files, a consumer reads committed files.

Flink: BoundedBlockingResultPartition / BoundedBlockingSubpartition and the consumer's channel over
them; here the files are a Delta table's (runtime.storage.blocking_results) instead of the
producer's local disk, so nothing needs the producer's TaskManager once its files are committed.

Record batches are stored as their data-plane frame payloads. Of the watermarks, only each
subpartition's last one is stored, after its records (Flink's BATCH mode has no watermarks but the
one at the end of input: event-time windows and timers fire then, with no late data). With one
subpartition per key group (adaptive batch), storing every watermark would multiply them by 128.
EndOfPartition is not stored: a channel ends when its files do. A blocking partition never
backpressures (it is written as fast as the disk takes it) and nobody reads it while it is being
written.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Iterator

from runtime.core.checkpoint import CheckpointBarrier
from runtime.core.errors import StorageError
from runtime.core.records import END_OF_PARTITION, EndOfPartition, RecordBatch, StreamElement, Watermark
from runtime.rpc.deployment import BlockingFileSlice
from runtime.rpc.messages import ProducedBlockingPartition
from runtime.storage.blocking_results import BlockingResultWriter, read_payloads
from runtime.taskmanager.network.errors import BlockingPartitionMissingError, PartitionError, PartitionReleasedError
from runtime.taskmanager.network.input import InputChannel, InputGate
from runtime.taskmanager.network.partition import ResultPartitionID, estimate_nbytes
from runtime.taskmanager.network.serialization import decode, encode


class BlockingResultPartition:
    """The producer side of a blocking exchange (same interface as ResultPartition for RecordWriter
    and Task). Used by the task thread only."""

    def __init__(self, partition_id: str, dataset_id: str, num_subpartitions: int, producer_attempt_id: str,
                 table_uri: str, producer_subtask: int) -> None:
        if num_subpartitions < 1:
            raise ValueError(f"partition {partition_id} needs at least one subpartition")
        self.id = ResultPartitionID(partition_id, producer_attempt_id)
        self.dataset_id = dataset_id
        self.num_subpartitions = num_subpartitions
        self._writer = BlockingResultWriter(table_uri, producer_subtask, producer_attempt_id, num_subpartitions)
        self._lock = threading.Lock()  # finish/release may come from a cancelling thread
        self._files: list | None = None
        self._released = False
        self._last_watermark: dict[int, Watermark] = {}
        self.bytes_out = 0

    # the RecordWriter hands watermarks to note_watermark instead of flushing its buffers for them
    defers_watermarks = True

    @property
    def partition_id(self) -> str:
        return self.id.partition_id

    def note_watermark(self, watermark: Watermark) -> None:
        """A watermark for every subpartition: kept (the last one), written after the records at the end."""
        for sub in range(self.num_subpartitions):
            self._last_watermark[sub] = watermark

    @property
    def is_finished(self) -> bool:
        return self._files is not None

    @property
    def is_released(self) -> bool:
        return self._released

    def backpressured_ns(self) -> int:
        return 0

    def is_producer_blocked(self, subpartition: int | None = None) -> bool:
        return False

    def has_capacity(self, subpartition: int) -> bool:
        return True

    def add(self, subpartition: int, element: StreamElement) -> None:
        if type(element) is EndOfPartition or isinstance(element, CheckpointBarrier):
            return  # a channel ends with its files; batch jobs take no checkpoints
        with self._lock:
            if self._released:
                raise PartitionReleasedError(f"partition {self.id} was released", self.partition_id)
            if self._files is not None:
                raise PartitionError(f"partition {self.id} is already finished", self.partition_id)
            if type(element) is Watermark:
                self._last_watermark[subpartition] = element  # written at the end
                return
            if isinstance(element, RecordBatch):
                self.bytes_out += estimate_nbytes(element)
            self._writer.write(subpartition, encode(element))

    def try_add(self, subpartition: int, element: StreamElement) -> bool:
        self.add(subpartition, element)
        return True

    def broadcast(self, element: StreamElement) -> None:
        for i in range(self.num_subpartitions):
            self.add(i, element)

    def finish(self) -> None:
        """Close every file (complete under its final name): the partition is ready to commit."""
        with self._lock:
            if self._released:
                raise PartitionReleasedError(f"partition {self.id} was released", self.partition_id)
            if self._files is None:
                for sub, wm in sorted(self._last_watermark.items()):
                    self._writer.write(sub, encode(wm))
                self._files = self._writer.close()

    def produced(self) -> ProducedBlockingPartition:
        if self._files is None:
            raise PartitionError(f"partition {self.id} is not finished", self.partition_id)
        return ProducedBlockingPartition(
            partition_id=self.partition_id, dataset_id=self.dataset_id, files=list(self._files), bytes=self._writer.bytes_written
        )

    def fail(self, cause: BaseException | None) -> None:
        self.release(cause)

    def release(self, cause: BaseException | None = None) -> None:
        """The attempt failed or was cancelled: its files are deleted (none were committed; the
        JobMaster commits only a FINISHED attempt's)."""
        with self._lock:
            if self._released or self._files is not None:
                self._released = True
                return
            self._released = True
            self._writer.abort()

    def __repr__(self) -> str:
        return f"BlockingResultPartition({self.id}, subpartitions={self.num_subpartitions})"


class BlockingInputChannel(InputChannel):
    """Reads one subpartition of a committed blocking result from its files, on the task thread."""

    def __init__(self, gate: InputGate, index: int, rpid: ResultPartitionID, subpartition: int, table_uri: str, files: list[BlockingFileSlice]) -> None:
        super().__init__(gate, index, rpid, subpartition)
        self._table_uri = table_uri
        self._files = list(files)
        self._payloads: Iterator[memoryview] | None = None
        self._closed = False
        self.read_s = 0.0  # time spent reading and decoding (metrics)

    def request(self) -> None:
        self.notify_available()  # the files are committed: everything is there already

    def _iter(self) -> Iterator[memoryview]:
        for f in self._files:
            try:
                yield from read_payloads(self._table_uri, f.path, f.row_groups)
            except (StorageError, OSError) as e:
                # typed, with the partition: the JobMaster re-runs its producer (region failover)
                # instead of restarting this consumer against the same missing files
                raise BlockingPartitionMissingError(
                    f"blocking partition {self.rpid.partition_id} cannot be read: {e}", self.rpid.partition_id
                ) from e

    def get_next(self) -> tuple[StreamElement | None, bool]:
        if self._closed:
            return None, False
        if self._payloads is None:
            self._payloads = self._iter()
        t0 = time.perf_counter()
        payload = next(self._payloads, None)
        element = END_OF_PARTITION if payload is None else decode(payload)
        self.read_s += time.perf_counter() - t0
        return element, payload is not None

    def close(self) -> None:
        self._closed = True
        self._payloads = None
