from __future__ import annotations

import numpy as np
import pytest

from runtime.api.datastream.functions import KeyedProcessFunction, TimeDomain
from runtime.api.datastream.state import ValueStateDescriptor
from runtime.api.operators.keyed_process import KeyedProcessOperator
from runtime.api.operators.runtime_context import StreamingRuntimeContext
from runtime.core.errors import MillraceError
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group
from runtime.core.records import ColumnBatch, Watermark
from tests.harness import CollectingOutput, FakeProcessingTimeService, Harness, make_context

pytestmark = pytest.mark.unit


class CountWithTimeout(KeyedProcessFunction):
    """The Flink docs example: count per key, emit (key, count) 10 ms after the last element."""

    def open(self, runtime_context):
        self.state = runtime_context.get_state(ValueStateDescriptor("count"))
        self.last = runtime_context.get_state(ValueStateDescriptor("last"))

    def process_element(self, value, ctx):
        key = ctx.get_current_key()
        assert key == value[0]
        self.state.update((self.state.value() or 0) + 1)
        self.last.update(ctx.timestamp())
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield ("seen", key, ctx.timestamp())

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == TimeDomain.EVENT_TIME
        if self.last.value() + 10 == timestamp:
            yield (ctx.get_current_key(), self.state.value(), timestamp)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_keyed_process_event_timers(backend):
    h = Harness(KeyedProcessOperator(lambda r: r[0], CountWithTimeout()), backend=backend)
    h.process([("a", 1), ("b", 2), ("a", 3)], [1, 2, 3])
    assert len(h.output.batches) == 1  # one batch per input batch
    assert h.output.records_with_timestamps() == [(("seen", "a", 1), 1), (("seen", "b", 2), 2), (("seen", "a", 3), 3)]
    h.output.clear()
    h.process([("b", 5), ("c", 20)], [5, 20])
    h.output.clear()
    h.watermark(14)
    # timers at 11 (a, stale), 12 (b, stale), 13 (a), 15 (b) ... only <= 14 fire, before the watermark
    assert h.output.events[0].rows() == [("a", 2, 13)]
    assert h.output.records_with_timestamps() == [(("a", 2, 13), 13)]
    assert h.output.events[-1] == Watermark(14)
    h.output.clear()
    h.watermark(1 << 62)
    assert h.output.records_with_timestamps() == [(("b", 2, 15), 15), (("c", 1, 30), 30)]
    assert isinstance(h.output.events[-1], Watermark)
    h.close()


class ProcTimer(KeyedProcessFunction):
    def process_element(self, value, ctx):
        now = ctx.timer_service().current_processing_time()
        ctx.timer_service().register_processing_time_timer(now + value)
        if value == 99:
            ctx.timer_service().delete_processing_time_timer(now + value)
        return None

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == TimeDomain.PROCESSING_TIME
        return [(ctx.get_current_key(), timestamp, ctx.timestamp())]


def test_keyed_process_processing_time_timers():
    h = Harness(KeyedProcessOperator(lambda v: v % 3, ProcTimer()), now=1000)
    h.process([5, 7, 99, 4])  # keys 2, 1, 0, 1
    assert h.output.batches == []
    h.advance_processing_time(1005)
    assert h.output.values() == [(1, 1004, 1004), (2, 1005, 1005)]
    # processing-time timer outputs carry no timestamp (Flink erases it)
    assert all(b.timestamps is None for b in h.output.batches)
    assert len(h.output.batches) == 1
    h.advance_processing_time(2000)
    assert len(h.output.values()) == 3 and h.output.values()[-1] == (1, 1007, 1007)


class Echo(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield (ctx.get_current_key(), value["v"])


def test_keyed_process_on_column_batches_with_field_key():
    h = Harness(KeyedProcessOperator("k", Echo()))
    h.op.process_batch(ColumnBatch({"k": np.array([1, 2, 1]), "v": np.array([10, 20, 30])}, None))
    assert h.output.records_with_timestamps() == [((1, 10), None), ((2, 20), None), ((1, 30), None)]


def test_key_outside_key_group_range_is_reported():
    h = Harness(KeyedProcessOperator(lambda v: v, Echo()), key_group_range=KeyGroupRange(0, 0))
    key = next(k for k in range(100) if assign_to_key_group(k, 128) != 0)
    with pytest.raises(MillraceError, match="key_by"):
        h.process([key])


def test_runtime_context_without_keyed_backend():
    ctx = make_context(CollectingOutput(), FakeProcessingTimeService())
    rc = StreamingRuntimeContext(ctx, None)
    assert rc.get_index_of_this_subtask() == 0 and rc.get_number_of_parallel_subtasks() == 1
    assert rc.get_task_name_with_subtasks() == "test task (1/1)#0"
    with pytest.raises(MillraceError, match="Keyed state can only be used on a KeyedStream"):
        rc.get_state(ValueStateDescriptor("x"))


def test_snapshot_and_restore_keyed_process_operator_with_timers():
    h = Harness(KeyedProcessOperator(lambda r: r[0], CountWithTimeout()))
    keys = [f"k{i}" for i in range(30)]
    h.process([(k, 1) for k in keys], [1] * len(keys))
    snap = h.op.snapshot_state(1).materialize_keyed()
    h.close()
    # rescale to two subtasks; each restores only its key groups and fires their timers
    outs = []
    for rng in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        h2 = Harness(KeyedProcessOperator(lambda r: r[0], CountWithTimeout()), key_group_range=rng, restore=snap)
        h2.watermark(100)
        outs.extend(h2.output.values())
        h2.close()
    assert sorted(outs) == sorted((k, 1, 11) for k in keys)
