from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from runtime.core.records import ColumnBatch, EndOfPartition, ObjectBatch, RecordBatch, StreamElement, Watermark
from runtime.graph.transformations import PartitionerKind
from runtime.taskmanager.network.partition import ResultPartition, SubpartitionView
from runtime.taskmanager.network.partitioners import create_partitioner
from runtime.taskmanager.network.writer import OutputFlusher, RecordWriter

pytestmark = pytest.mark.unit


_views: dict[tuple[int, int], SubpartitionView] = {}


def drain(partition: ResultPartition, sub: int) -> list[StreamElement]:
    """Everything queued in one subpartition now (one reader per subpartition, reused)."""
    key = (id(partition), sub)
    if key not in _views:
        _views[key] = partition.create_view(sub, lambda: None)
    view = _views[key]
    out: list[StreamElement] = []
    while True:
        el, _ = view.poll()
        if el is None:
            return out
        out.append(el)


def column_batches(els: list[StreamElement]) -> list[ColumnBatch]:
    """The elements, each checked to be a ColumnBatch."""
    out = [e for e in els if isinstance(e, ColumnBatch)]
    assert len(out) == len(els), [type(e).__name__ for e in els]
    return out


def rows(n: int, start: int = 0, ts: bool = True) -> ColumnBatch:
    ids = np.arange(start, start + n, dtype=np.int64)
    return ColumnBatch({"id": ids}, ids * 2 if ts else None)


def writer_for(kind: PartitionerKind, channels: int, capacity: int = 100, buffer_records: int = 100,
               key: object = None, **kw: Any) -> RecordWriter:
    part = ResultPartition("p:0", channels, capacity, "att")
    return RecordWriter(part, create_partitioner(kind, key, channels, 128), buffer_records, **kw)


def test_small_batches_are_coalesced_into_full_buffers() -> None:
    w = writer_for(PartitionerKind.FORWARD, 1)
    for i in range(250):
        w.emit(rows(1, i))
    out = column_batches(drain(w.partition, 0))
    assert [len(b) for b in out] == [100, 100]
    assert w.pending_rows(0) == 50
    w.flush_all()
    out += column_batches(drain(w.partition, 0))
    assert [len(b) for b in out] == [100, 100, 50]
    ids = np.concatenate([b.columns["id"] for b in out])
    np.testing.assert_array_equal(ids, np.arange(250))
    np.testing.assert_array_equal(np.concatenate([b.timestamps for b in out]), np.arange(250) * 2)


def test_big_batches_pass_through_uncopied_after_pending() -> None:
    w = writer_for(PartitionerKind.FORWARD, 1)
    small, big = rows(3), rows(500, 3)
    w.emit(small)
    w.emit(big)
    out = column_batches(drain(w.partition, 0))
    assert len(out) == 2 and out[1] is big
    assert out[0].columns["id"].tolist() == [0, 1, 2]


def test_incompatible_batches_are_not_merged() -> None:
    w = writer_for(PartitionerKind.FORWARD, 1)
    w.emit(rows(2))
    w.emit(rows(2, 2, ts=False))  # no timestamps: merging would drop the others'
    w.emit(ObjectBatch([1, 2]))
    w.emit(ColumnBatch({"other": np.array([1.0])}))
    w.flush_all()
    out = drain(w.partition, 0)
    assert [type(b).__name__ for b in out] == ["ColumnBatch", "ColumnBatch", "ObjectBatch", "ColumnBatch"]
    first, second = column_batches(out[:2])
    assert first.timestamps is not None and second.timestamps is None


def test_events_flush_pending_data_first_on_every_channel() -> None:
    w = writer_for(PartitionerKind.HASH, 2, key="id")
    w.emit(rows(50))
    w.broadcast_event(Watermark(7))
    w.emit(rows(50, 50))
    w.finish()
    total = 0
    for sub in range(2):
        out = drain(w.partition, sub)
        assert isinstance(out[-1], EndOfPartition)
        wm = next(i for i, e in enumerate(out) if isinstance(e, Watermark))
        before = [i for b in column_batches(out[:wm]) for i in b.columns["id"].tolist()]
        after = [i for b in column_batches(out[wm + 1 : -1]) for i in b.columns["id"].tolist()]
        assert all(i < 50 for i in before) and all(i >= 50 for i in after)
        total += len(before) + len(after)
    assert total == 100


def test_broadcast_partitioner_and_flush_always() -> None:
    w = writer_for(PartitionerKind.BROADCAST, 3, flush_always=True)
    b = rows(5)
    w.emit(b)
    for sub in range(3):
        assert drain(w.partition, sub) == [b]


def test_periodic_flusher_moves_low_rate_data() -> None:
    flusher = OutputFlusher(0.01)
    try:
        w = writer_for(PartitionerKind.FORWARD, 1, flusher=flusher)
        arrived = threading.Event()
        view = w.partition.create_view(0, arrived.set)
        w.emit(rows(1))
        assert arrived.wait(5.0)
        el, _ = view.poll()
        assert isinstance(el, RecordBatch) and len(el) == 1
        w.close()
    finally:
        flusher.stop()


def test_flusher_never_exceeds_capacity() -> None:
    w = writer_for(PartitionerKind.FORWARD, 1, capacity=1, buffer_records=10)
    w.emit(rows(10))  # fills the only slot
    w.emit(rows(3, 10))  # pending
    w.try_flush()  # must neither block nor overfill
    assert w.partition.backlog(0) == 1 and w.pending_rows(0) == 3
    drain(w.partition, 0)
    w.try_flush()
    assert w.partition.backlog(0) == 1 and w.pending_rows(0) == 0
