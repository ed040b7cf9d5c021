from __future__ import annotations

import numpy as np
import pytest

from runtime.api.common import Duration, TimestampAssigner, WatermarkStrategy
from runtime.api.datastream.functions import (
    CoFlatMapFunction,
    CoMapFunction,
    FlatMapFunction,
    MapFunction,
    ProcessFunction,
)
from runtime.api.operators.simple import (
    CoStreamFlatMap,
    CoStreamMap,
    MapBatchesOperator,
    ProcessOperator,
    StreamFilter,
    StreamFlatMap,
    StreamMap,
    TimestampsAndWatermarksOperator,
)
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, ObjectBatch, Watermark
from runtime.core.row import Row
from tests.harness import FakeProcessingTimeService, obj, open_operator, run_one_input

pytestmark = pytest.mark.unit


def test_map_lambda_keeps_timestamps_one_batch_per_input():
    out = run_one_input(StreamMap(lambda x: x * 2), [obj([1, 2, 3], [10, 20, 30]), obj([4])])
    assert out.values() == [2, 4, 6, 8]
    assert out.timestamps() == [10, 20, 30, None]
    assert len(out.batches) == 2


class Opened(MapFunction):
    def __init__(self) -> None:
        self.sub = None
        self.closed = False

    def open(self, runtime_context):
        self.sub = (runtime_context.get_index_of_this_subtask(), runtime_context.get_number_of_parallel_subtasks())

    def map(self, value):
        return (self.sub, value)

    def close(self):
        self.closed = True


def test_map_function_open_close_with_runtime_context():
    fn = Opened()
    out = run_one_input(StreamMap(fn), [obj(["a"])], subtask=1, parallelism=3)
    assert out.values() == [((1, 3), "a")]
    assert fn.closed


def test_flat_map_outputs_inherit_input_timestamp():
    class Split(FlatMapFunction):
        def flat_map(self, value):
            yield from value.split()

    out = run_one_input(StreamFlatMap(Split()), [obj(["a b", "", "c"], [1, 2, 3])])
    assert out.values() == ["a", "b", "c"]
    assert out.timestamps() == [1, 1, 3]
    assert len(out.batches) == 1


def test_flat_map_lambda_returning_list_and_none():
    out = run_one_input(StreamFlatMap(lambda x: [x] * x if x else None), [obj([0, 1, 2])])
    assert out.values() == [1, 2, 2]


def test_filter_keeps_column_batch_columnar():
    cb = ColumnBatch({"k": np.array([1, 2, 3, 4]), "v": np.array([1.0, 2.0, 3.0, 4.0])}, np.array([5, 6, 7, 8]))
    out = run_one_input(StreamFilter(lambda r: r.k % 2 == 0), [cb, obj([Row(k=1, v=0.0), Row(k=3, v=0.0)])])
    assert len(out.batches) == 1
    b = out.batches[0]
    assert isinstance(b, ColumnBatch)
    assert b["k"].tolist() == [2, 4] and b.timestamps.tolist() == [6, 8]


def test_process_function_sees_timestamp_and_refuses_timers():
    class P(ProcessFunction):
        def process_element(self, value, ctx):
            yield (value, ctx.timestamp(), ctx.timer_service().current_processing_time())

    out = run_one_input(ProcessOperator(P()), [obj(["x"], [42])])
    assert out.values() == [("x", 42, 0)]

    class T(ProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(5)

    op = ProcessOperator(T())
    open_operator(op)
    with pytest.raises(InvalidProgramError, match="keyed streams"):
        op.process_batch(obj([1]))


def test_map_batches_numpy_keeps_timestamps_when_count_unchanged():
    cb = ColumnBatch({"x": np.arange(4)}, np.array([1, 2, 3, 4]))
    out = run_one_input(MapBatchesOperator(lambda c: {"x": c["x"], "y": c["x"] * 10}), [cb])
    b = out.batches[0]
    assert isinstance(b, ColumnBatch)
    assert b["y"].tolist() == [0, 10, 20, 30] and b.timestamps.tolist() == [1, 2, 3, 4]
    # fewer rows: timestamps cannot be matched, so none
    out2 = run_one_input(MapBatchesOperator(lambda c: {"x": c["x"][c["x"] > 1]}), [cb])
    assert out2.batches[0]["x"].tolist() == [2, 3] and out2.batches[0].timestamps is None


def test_map_batches_pyarrow_from_named_rows():
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = [Row(a=1, b="x"), Row(a=2, b="y")]

    def fn(rb: pa.RecordBatch) -> pa.RecordBatch:
        assert isinstance(rb, pa.RecordBatch)
        return pa.RecordBatch.from_arrays([pc.multiply(rb.column(0), 3), rb.column(1)], names=["a3", "b"])

    out = run_one_input(MapBatchesOperator(fn, "pyarrow"), [obj(rows)])
    assert [r.as_dict() for r in out.values()] == [{"a3": 3, "b": "x"}, {"a3": 6, "b": "y"}]


def test_map_batches_rejects_unnamed_records():
    op = MapBatchesOperator(lambda c: c)
    open_operator(op)
    with pytest.raises(InvalidProgramError, match="named Rows or dicts"):
        op.process_batch(obj([1, 2]))


def test_co_map_and_co_flat_map():
    class CM(CoMapFunction):
        def map1(self, value):
            return ("left", value)

        def map2(self, value):
            return ("right", value)

    op = CoStreamMap(CM())
    out = open_operator(op)
    op.process_batch(obj([1]), 0)
    op.process_batch(obj([2], [7]), 1)
    assert out.values() == [("left", 1), ("right", 2)]
    assert out.timestamps() == [None, 7]

    class CF(CoFlatMapFunction):
        def flat_map1(self, value):
            return [value, value]

        def flat_map2(self, value):
            return []

    op2 = CoStreamFlatMap(CF())
    out2 = open_operator(op2)
    op2.process_batch(obj(["a"]), 0)
    op2.process_batch(obj(["b"]), 1)
    assert out2.values() == ["a", "a"]


def test_co_operator_combines_watermarks_by_min():
    op = CoStreamMap(None)  # watermarks only
    out = open_operator(op)
    op.process_watermark(Watermark(10), 0)
    assert out.watermarks == []
    op.process_watermark(Watermark(5), 1)
    op.process_watermark(Watermark(20), 1)
    assert out.watermarks == [5, 10]


class TsFromTuple(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


PER_BATCH = {"pipeline.auto-watermark-interval": "0"}


def test_bounded_out_of_orderness_watermarks_per_batch():
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10)).with_timestamp_assigner(TsFromTuple())
    op = TimestampsAndWatermarksOperator(strategy)
    out = open_operator(op, config=PER_BATCH)
    op.process_batch(obj([("a", 100), ("b", 90)]))
    op.process_batch(obj([("c", 95)]))  # max unchanged: no new watermark
    op.process_watermark(Watermark(1000))  # upstream watermarks are ignored
    op.process_batch(obj([("d", 150)]))
    op.end_input()
    assert out.timestamps() == [100, 90, 95, 150]
    assert out.watermarks == [100 - 10 - 1, 150 - 10 - 1, MAX_TIMESTAMP]
    # the watermark follows its batch
    assert isinstance(out.events[0], ObjectBatch) and out.events[1] == Watermark(89)


def test_monotonous_field_assigner_is_vectorized_on_columns():
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    op = TimestampsAndWatermarksOperator(strategy)
    out = open_operator(op, config=PER_BATCH)
    cb = ColumnBatch({"ts_ms": np.array([5, 7, 6]), "v": np.array([1, 2, 3])})
    op.process_batch(cb)
    assert isinstance(out.batches[0], ColumnBatch)
    assert out.timestamps() == [5, 7, 6]
    assert out.watermarks == [6]
    # per-record path of the same assigner on Rows
    op.process_batch(obj([Row(ts_ms=20, v=1)]))
    assert out.watermarks == [6, 19]


def test_watermarks_are_periodic_by_default():
    """Flink's pipeline.auto-watermark-interval (200 ms): the watermark of the largest timestamp so
    far, emitted by a processing-time timer when it advanced, not after every batch."""
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(10)).with_timestamp_assigner(TsFromTuple())
    op = TimestampsAndWatermarksOperator(strategy)
    pts = FakeProcessingTimeService(now=1000)
    out = open_operator(op, processing_time_service=pts)
    op.process_batch(obj([("a", 100), ("b", 90)]))
    op.process_batch(obj([("c", 120)]))
    assert out.watermarks == []
    pts.advance_to(1199)
    assert out.watermarks == []
    pts.advance_to(1200)
    assert out.watermarks == [120 - 10 - 1]
    pts.advance_to(1400)  # nothing new: nothing emitted
    op.process_batch(obj([("d", 150)]))
    pts.advance_to(1600)
    op.end_input()
    assert out.watermarks == [109, 139, MAX_TIMESTAMP]
    pts.advance_to(5000)  # ended: the timer is not renewed
    assert out.watermarks == [109, 139, MAX_TIMESTAMP] and pts.pending == 0
    with pytest.raises(InvalidProgramError, match="auto-watermark-interval"):
        open_operator(TimestampsAndWatermarksOperator(strategy), config={"pipeline.auto-watermark-interval": "-5"})


def test_no_watermarks_strategy_still_ends_with_max():
    op = TimestampsAndWatermarksOperator(WatermarkStrategy.no_watermarks().with_timestamp_assigner(lambda v, t: v))
    out = run_one_input(op, [obj([3, 1])])
    assert out.timestamps() == [3, 1]
    assert out.watermarks == [MAX_TIMESTAMP]
