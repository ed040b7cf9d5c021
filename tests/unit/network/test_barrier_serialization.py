"""Checkpoint barriers in-band: wire format, and their order relative to records in RecordWriter."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from runtime.core.checkpoint import CheckpointBarrier, CheckpointingMode
from runtime.core.records import ColumnBatch, EndOfPartition, StreamElement, Watermark
from runtime.graph.transformations import PartitionerKind
from runtime.taskmanager.network.partition import ResultPartition
from runtime.taskmanager.network.partitioners import create_partitioner
from runtime.taskmanager.network.serialization import CODE_CHECKPOINT_BARRIER, decode, encode, is_data
from runtime.taskmanager.network.writer import OutputFlusher, RecordWriter

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("mode", list(CheckpointingMode))
@pytest.mark.parametrize("cid,ts", [(0, 0), (1, 1_700_000_000_000), ((1 << 63) - 1, -(1 << 63))])
def test_barrier_round_trips_compactly(mode: CheckpointingMode, cid: int, ts: int) -> None:
    b = CheckpointBarrier(cid, ts, mode)
    payload = encode(b)
    assert payload[0] == CODE_CHECKPOINT_BARRIER and len(payload) == 1 + 8 + 8 + 1
    out = decode(payload)
    assert out == b and type(out) is CheckpointBarrier and out.mode is mode
    assert not is_data(out)


@pytest.mark.parametrize("mode", list(CheckpointingMode))
def test_a_stop_with_savepoint_barrier_keeps_its_target_and_mode_and_says_it_is_synchronous(mode: CheckpointingMode) -> None:
    b = CheckpointBarrier(7, 8, mode, "/savepoints/sp-1", synchronous=True)
    payload = encode(b)
    assert len(payload) == 1 + 8 + 8 + 1 + len("/savepoints/sp-1")
    out = decode(payload)
    assert out == b and out.synchronous and out.mode is mode and out.target_location == "/savepoints/sp-1"
    assert not decode(encode(CheckpointBarrier(7, 8, mode, "/savepoints/sp-1"))).synchronous


def test_corrupt_barrier_payloads_are_refused() -> None:
    good = encode(CheckpointBarrier(1, 2))
    with pytest.raises(ValueError, match="corrupt checkpoint barrier"):
        decode(good[:-1])
    with pytest.raises(ValueError, match="unknown checkpointing mode"):
        decode(good[:-1] + bytes([9]))


def test_barrier_decodes_in_a_fresh_process() -> None:
    """The code is registered at import of the serialization module, in every process."""
    import subprocess
    import sys

    payload = encode(CheckpointBarrier(42, 7, CheckpointingMode.AT_LEAST_ONCE))
    code = (
        "import sys; from runtime.taskmanager.network.serialization import decode; "
        "print(decode(bytes.fromhex(sys.argv[1])))"
    )
    out = subprocess.run([sys.executable, "-c", code, payload.hex()], capture_output=True, text=True, check=True)
    assert "checkpoint_id=42" in out.stdout and "AT_LEAST_ONCE" in out.stdout


# ---- RecordWriter: records before a barrier stay before it on every subpartition -------------

def drain_all(p: ResultPartition) -> list[list[StreamElement]]:
    out: list[list[StreamElement]] = []
    for sub in range(p.num_subpartitions):
        view = p.create_view(sub, lambda: None)
        els: list[StreamElement] = []
        while (el := view.poll()[0]) is not None:
            els.append(el)
        out.append(els)
    return out


def ids(els: list[StreamElement]) -> list[int]:
    return [i for e in els if isinstance(e, ColumnBatch) for i in e.columns["id"].tolist()]


@pytest.mark.parametrize("kind", [PartitionerKind.HASH, PartitionerKind.REBALANCE, PartitionerKind.BROADCAST])
def test_records_before_the_barrier_arrive_before_it_on_every_subpartition(kind: PartitionerKind) -> None:
    n = 4
    part = ResultPartition("p:0", n, 1000, "att")
    key = "id" if kind is PartitionerKind.HASH else None
    w = RecordWriter(part, create_partitioner(kind, key, n, 128), buffer_records=64)
    for i in range(0, 100, 10):  # small batches: partly still pending in the writer
        w.emit(ColumnBatch({"id": np.arange(i, i + 10, dtype=np.int64)}))
    w.broadcast_event(CheckpointBarrier(1, 0))
    w.emit(ColumnBatch({"id": np.arange(100, 200, dtype=np.int64)}))
    w.broadcast_event(Watermark(5))
    w.emit(ColumnBatch({"id": np.arange(200, 210, dtype=np.int64)}))
    w.broadcast_event(CheckpointBarrier(2, 0))
    w.finish()
    seen: list[int] = []
    for els in drain_all(part):
        kinds = [type(e).__name__ for e in els if not isinstance(e, ColumnBatch)]
        assert kinds == ["CheckpointBarrier", "Watermark", "CheckpointBarrier", "EndOfPartition"]
        b1 = next(i for i, e in enumerate(els) if e == CheckpointBarrier(1, 0))
        wm = els.index(Watermark(5))
        b2 = next(i for i, e in enumerate(els) if e == CheckpointBarrier(2, 0))
        assert all(i < 100 for i in ids(els[:b1]))
        assert all(100 <= i < 200 for i in ids(els[b1 + 1 : wm]))
        assert all(200 <= i < 210 for i in ids(els[wm + 1 : b2]))
        assert b2 == len(els) - 2 and isinstance(els[-1], EndOfPartition)
        seen += ids(els[:-1])
    expected = list(range(210)) * (n if kind is PartitionerKind.BROADCAST else 1)
    assert sorted(seen) == sorted(expected)


def test_barrier_is_sent_at_once_not_at_the_buffer_timeout() -> None:
    part = ResultPartition("p:0", 2, 10, "att")
    notified = [threading.Event(), threading.Event()]
    views = [part.create_view(i, notified[i].set) for i in range(2)]
    flusher = OutputFlusher(interval_s=60.0)  # the periodic flush never fires during the test
    try:
        w = RecordWriter(part, create_partitioner(PartitionerKind.REBALANCE, None, 2, 128), 1000, flusher=flusher)
        w.emit(ColumnBatch({"id": np.arange(3, dtype=np.int64)}))
        assert not any(e.is_set() for e in notified)  # small batch: still pending in the writer
        t0 = time.monotonic()
        w.broadcast_event(CheckpointBarrier(1, 0))
        assert all(e.is_set() for e in notified) and time.monotonic() - t0 < 1.0
        for v in views:
            els = []
            while (el := v.poll()[0]) is not None:
                els.append(el)
            assert els[-1] == CheckpointBarrier(1, 0)
            assert isinstance(els[0], ColumnBatch)  # the pending records went first
        w.close()
    finally:
        flusher.stop()


def test_barrier_reaches_free_subpartitions_while_another_is_backpressured() -> None:
    """Per subpartition: its pending records, then the barrier -- a full subpartition does not
    hold the barrier back from the others."""
    part = ResultPartition("p:0", 2, 1, "att")
    w = RecordWriter(part, create_partitioner(PartitionerKind.REBALANCE, None, 2, 128), 100)
    w.emit(ColumnBatch({"id": np.arange(0, 2, dtype=np.int64)}))
    w.flush_all()  # one batch in each subpartition: both full (capacity 1)
    v0, v1 = part.create_view(0, lambda: None), part.create_view(1, lambda: None)
    first0 = v0.poll()[0]  # subpartition 0 has room again, subpartition 1 stays full
    assert first0 is not None
    w.emit(ColumnBatch({"id": np.arange(2, 4, dtype=np.int64)}))  # pending: one row per subpartition
    t = threading.Thread(target=w.broadcast_event, args=(CheckpointBarrier(1, 0),), daemon=True)
    t.start()
    got0: list[StreamElement] = []
    deadline = time.monotonic() + 5
    while len(got0) < 2 and time.monotonic() < deadline:
        el = v0.poll()[0]
        if el is None:
            time.sleep(0.001)
        else:
            got0.append(el)
    assert len(ids(got0)) == 1 and got0[1] == CheckpointBarrier(1, 0)  # got it although 1 is full
    assert t.is_alive() and part.is_producer_blocked(1)
    first1 = v1.poll()[0]  # room in subpartition 1: the writer moves its record, then the barrier
    assert first1 is not None
    got1 = [first1]
    t.join(5)
    while (e := v1.poll()[0]) is not None:
        got1.append(e)
    assert len(ids(got1)) == 2 and got1[-1] == CheckpointBarrier(1, 0) and len(got1) == 3
    assert sorted(ids([first0, *got0, *got1])) == [0, 1, 2, 3]
