from __future__ import annotations

import zlib

import numpy as np
import pytest

from runtime.api.datastream.aggregates import Aggregates, Count, Max, Min, Sum
from runtime.api.datastream.functions import ProcessWindowFunction
from runtime.api.datastream.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from runtime.api.operators.columnar_window import ColumnarWindowAggregateOperator
from runtime.api.operators.window_operator import WindowOperator
from runtime.core.errors import InvalidProgramError
from runtime.core.keygroups import KeyGroupRange
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, ObjectBatch, Watermark
from runtime.core.row import Row
from tests.harness import Harness, through_state_files

pytestmark = pytest.mark.unit

AGG = Aggregates.of(count=Count(), sum=Sum("value"), lo=Min("value"), hi=Max("value"))


class WithWindow(ProcessWindowFunction):
    """Shape the per-record result like the columnar operator's rows."""

    def process(self, key, context, elements):
        (r,) = list(elements)
        w = context.window()
        yield (key, w.start, w.end, *r)


def gen_batches(seed, n_batches=30, batch=200, keys=50, bound=40, str_keys=False, late_frac=0.02):
    rng = np.random.default_rng(seed)
    out = []
    t = 10_000
    mx = -(1 << 62)
    for _ in range(n_batches):
        base = t + np.sort(rng.integers(0, 100, batch))
        ts = base - rng.integers(0, bound, batch)
        late = rng.random(batch) < late_frac
        ts[late] -= rng.integers(100, 400, late.sum())
        t += 100
        k = rng.integers(0, keys, batch)
        key = np.char.add("key-", k.astype(str)) if str_keys else k.astype(np.int64)
        cols = {"key": key, "value": rng.integers(-50, 1000, batch).astype(np.int64), "other": rng.random(batch)}
        mx = max(mx, int(ts.max()))
        out.append((ColumnBatch(cols, ts.astype(np.int64)), mx - bound - 1))
    return out


def run_columnar(op, batches, **kw):
    h = Harness(op, **kw)
    for b, wm in batches:
        h.op.process_batch(b)
        h.watermark(wm)
    h.watermark(MAX_TIMESTAMP)
    return h


def columnar_rows(h):
    rows = []
    for b in h.output.batches:
        assert isinstance(b, ColumnBatch)
        assert list(b.columns) == ["key", "window_start", "window_end", "count", "sum", "lo", "hi"]
        assert (b.timestamps == b.columns["window_end"] - 1).all()
        rows.extend(tuple(r) for r in zip(*(c.tolist() for c in b.columns.values())))
    return rows


@pytest.mark.parametrize(
    "assigner",
    [TumblingEventTimeWindows.of(100), TumblingEventTimeWindows.of(70, 13), SlidingEventTimeWindows.of(150, 50), SlidingEventTimeWindows.of(100, 30)],
)
@pytest.mark.parametrize("str_keys", [False, True])
def test_columnar_equals_per_record_window_operator(assigner, str_keys):
    batches = gen_batches(seed=zlib.crc32(f"{assigner!r}{str_keys}".encode()), str_keys=str_keys)
    col = run_columnar(ColumnarWindowAggregateOperator("key", assigner, AGG), batches)
    per = run_columnar(WindowOperator("key", assigner, None, ("aggregate", AGG, WithWindow())), batches)
    got, want = columnar_rows(col), per.output.values()
    assert len(want) > 100
    assert sorted(got) == sorted(want)
    assert col.op.num_late_records_dropped == per.op.num_late_records_dropped > 0
    # one ColumnBatch per watermark that fires windows, emitted before that watermark
    for i, e in enumerate(col.output.events):
        if isinstance(e, ColumnBatch):
            assert isinstance(col.output.events[i + 1], Watermark)
            assert e.timestamps.max() <= col.output.events[i + 1].timestamp
    assert col.op.pending_windows == []


def test_object_batches_of_rows_are_converted():
    op = ColumnarWindowAggregateOperator("key", TumblingEventTimeWindows.of(10), Aggregates.of(Count(), Sum("value")))
    h = Harness(op)
    h.op.process_batch(ObjectBatch([Row(key="a", value=1), Row(key="b", value=2), Row(key="a", value=3)], np.array([1, 2, 12])))
    h.watermark(MAX_TIMESTAMP)
    (b,) = h.output.batches
    assert list(b.columns) == ["key", "window_start", "window_end", "count", "sum_value"]
    assert sorted(zip(*(c.tolist() for c in b.columns.values()))) == [("a", 0, 10, 1, 1), ("a", 10, 20, 1, 3), ("b", 0, 10, 1, 2)]


def test_columnar_allowed_lateness():
    op = ColumnarWindowAggregateOperator("key", TumblingEventTimeWindows.of(10), Aggregates.of(count=Count(), sum=Sum("value")), allowed_lateness=5)
    h = Harness(op)

    def cb(keys: list[int], vals: list[int], ts: list[int]) -> ColumnBatch:
        return ColumnBatch({"key": np.array(keys), "value": np.array(vals)}, np.array(ts))

    h.op.process_batch(cb([1, 1, 2], [1, 2, 3], [1, 2, 3]))
    h.watermark(9)
    h.op.process_batch(cb([1, 3], [10, 20], [4, 11]))  # key 1 late but allowed: re-emitted with the update
    h.watermark(14)
    h.op.process_batch(cb([1], [100], [5]))  # past cleanup: dropped
    h.watermark(MAX_TIMESTAMP)
    rows = [tuple(r) for b in h.output.batches for r in zip(*(c.tolist() for c in b.columns.values()))]
    assert rows == [(1, 0, 10, 2, 3), (2, 0, 10, 1, 3), (1, 0, 10, 3, 13), (3, 10, 20, 1, 20)]
    assert op.num_late_records_dropped == 1


def test_columnar_processing_time_windows():
    op = ColumnarWindowAggregateOperator("key", TumblingProcessingTimeWindows.of(10), Count())
    h = Harness(op, now=1001)
    h.op.process_batch(ColumnBatch({"key": np.array([1, 2, 1])}))
    h.advance_processing_time(1005)
    h.op.process_batch(ColumnBatch({"key": np.array([1])}))
    assert h.output.batches == []
    h.advance_processing_time(1010)
    (b,) = h.output.batches
    assert sorted(zip(b.columns["key"].tolist(), b.columns["count"].tolist())) == [(1, 3), (2, 1)]
    assert b.timestamps.tolist() == [1009, 1009]

    op = ColumnarWindowAggregateOperator("key", SlidingProcessingTimeWindows.of(20, 10), Count())
    h = Harness(op, now=1005)
    h.op.process_batch(ColumnBatch({"key": np.array([7])}))
    h.advance_processing_time(1100)
    starts = sorted(s for b in h.output.batches for s in b.columns["window_start"].tolist())
    assert starts == [990, 1000]


def test_columnar_snapshot_restore_rescaled(tmp_path):
    batches = gen_batches(seed=5, n_batches=20, late_frac=0)
    assigner = SlidingEventTimeWindows.of(300, 100)
    whole = run_columnar(ColumnarWindowAggregateOperator("key", assigner, AGG), batches)
    h = Harness(ColumnarWindowAggregateOperator("key", assigner, AGG))
    for b, wm in batches[:10]:
        h.op.process_batch(b)
        h.watermark(wm)
    before = columnar_rows(h)
    snap = h.op.snapshot_state(1).materialize_keyed()
    assert snap and all(0 <= kg < 128 for kg in snap)
    rows = list(before)
    for rng in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        restored = through_state_files(snap, str(tmp_path / f"{rng.start}"), rng)  # as checkpoint rows, like a restore
        h2 = Harness(ColumnarWindowAggregateOperator("key", assigner, AGG), key_group_range=rng, restore=restored)
        h2.watermark(batches[9][1])
        for b, wm in batches[10:]:
            kgs = h2.op._key_groups(b.columns["key"])
            h2.op.process_batch(b.take(np.flatnonzero((kgs >= rng.start) & (kgs <= rng.end))))
            h2.watermark(wm)
        h2.watermark(MAX_TIMESTAMP)
        rows.extend(columnar_rows(h2))
    assert sorted(rows) == sorted(columnar_rows(whole))


def test_columnar_rejects_session_windows():
    with pytest.raises(InvalidProgramError):
        ColumnarWindowAggregateOperator("key", EventTimeSessionWindows.with_gap(10), Count())


def test_columnar_aggregate_as_aggregate_function():
    agg = Aggregates.of(n=Count(), s=Sum("v"), lo=Min("v"), hi=Max("v"))
    a = agg.create_accumulator()
    for v in [3, 1, 4]:
        a = agg.add({"v": v}, a)
    b = agg.add(Row(v=-2), agg.create_accumulator())
    assert agg.get_result(agg.merge(a, b)) == Row(n=4, s=6, lo=-2, hi=4)


def test_key_column_changing_type_between_batches_is_refused_not_merged() -> None:
    from runtime.api.datastream.aggregates import Aggregates, Count
    from runtime.api.datastream.window import TumblingEventTimeWindows
    from runtime.api.operators.columnar_window import ColumnarWindowAggregateOperator
    from runtime.core.errors import MillraceError
    from runtime.core.records import ColumnBatch
    from tests.harness import open_operator

    op = ColumnarWindowAggregateOperator("k", TumblingEventTimeWindows.of(1000), Aggregates.of(count=Count()))
    open_operator(op)
    op.process_batch(ColumnBatch({"k": np.array([1, 2])}, np.array([10, 20], dtype=np.int64)))
    with pytest.raises(MillraceError, match="changed type from <i8 to str"):
        op.process_batch(ColumnBatch({"k": np.array(["1"])}, np.array([30], dtype=np.int64)))


@pytest.mark.parametrize("assigner", [TumblingEventTimeWindows.of(10), SlidingEventTimeWindows.of(30, 10)])
def test_batches_spanning_many_windows_give_the_same_windows_through_a_snapshot(tmp_path, assigner):
    """A batch exchange's key-group subpartition is one batch over the whole input (hundreds of windows):
    those are aggregated in one pass and spilled until something reads the panes (fire, snapshot)."""
    rng = np.random.default_rng(11)
    batches = []
    for _ in range(6):  # each batch spans ~500 windows of 10 ms, in no particular order
        n = 3000
        batches.append(ColumnBatch(
            {"key": rng.integers(0, 40, n).astype(np.int64), "value": rng.integers(0, 100, n).astype(np.int64)},
            rng.integers(0, 5000, n).astype(np.int64),
        ))
    as_one = [(b, -1) for b in batches]
    col = run_columnar(ColumnarWindowAggregateOperator("key", assigner, AGG), as_one)
    per = run_columnar(WindowOperator("key", assigner, None, ("aggregate", AGG, WithWindow())), as_one)
    assert sorted(columnar_rows(col)) == sorted(per.output.values()) and len(per.output.values()) > 1000
    # a snapshot between the batches holds the spilled partials; restored, the rest gives the same windows
    h = Harness(ColumnarWindowAggregateOperator("key", assigner, AGG))
    for b in batches[:3]:
        h.op.process_batch(b)
    assert h.op._spill  # not yet in panes
    restored = through_state_files(h.op.snapshot_state(1).materialize_keyed(), str(tmp_path / "s"), KeyGroupRange(0, 127))
    h2 = Harness(ColumnarWindowAggregateOperator("key", assigner, AGG), restore=restored)
    for b in batches[3:]:
        h2.op.process_batch(b)
    h2.watermark(MAX_TIMESTAMP)
    assert sorted(columnar_rows(h2)) == sorted(columnar_rows(col))
