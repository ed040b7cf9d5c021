"""Keyed operators on the checkpoint contract: a snapshot taken in the middle of a stream and restored
(through real checkpoint rows, into the other backend) gives the output of an uninterrupted run,
even when the original goes on changing its state between the synchronous part and the supplier."""
from __future__ import annotations

import random
import time

import numpy as np
import pytest

from runtime.api.datastream.aggregates import Aggregates, Count, Max, Min, Sum
from runtime.api.datastream.functions import KeyedProcessFunction, ProcessWindowFunction, ReduceFunction
from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor
from runtime.api.datastream.window import (
    CountTrigger,
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from runtime.api.operators.columnar_window import ColumnarWindowAggregateOperator
from runtime.api.operators.keyed_process import KeyedProcessOperator
from runtime.api.operators.window_operator import WindowOperator
from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch
from tests.harness import Harness, keyed_entries, through_state_files
from tests.unit.operators.test_window_operator import AvgAgg

pytestmark = pytest.mark.unit

FULL = KeyGroupRange(0, 127)
OTHER = {"hashmap": "rocksdb", "rocksdb": "hashmap"}


# --------------------------------------------------------------------------- driving a harness
def steps_of(events, batch=8, pt_step=7):
    """Batches of (key, value, ts) events, each followed by a watermark and a processing-time advance."""
    out, wm, now = [], 0, 1000
    for i in range(0, len(events), batch):
        chunk = events[i : i + batch]
        out.append(("batch", chunk))
        wm = max(wm, max(e[2] for e in chunk) - 15)
        now += pt_step
        out += [("wm", wm), ("pt", now)]
    return out + [("wm", MAX_TIMESTAMP), ("pt", now + 10_000)]


def drive(h, steps):
    for kind, arg in steps:
        if kind == "batch":
            h.process(list(arg), [e[2] for e in arg])
        elif kind == "wm":
            h.watermark(arg)
        else:
            h.advance_processing_time(arg)


def now_after(steps, start=1000):
    return max([start] + [a for k, a in steps if k == "pt"])


def records(h):
    return sorted(map(repr, h.output.records_with_timestamps()))


def run_interrupted(make_op, steps, cut, backend, tmp_path, key_group_range=FULL):
    """Run steps[:cut], snapshot (synchronous part), let the original run 4 more steps, then build
    the snapshot, restore it into a fresh operator on the other backend and run steps[cut:]."""
    h = Harness(make_op(), backend=backend, now=1000)
    drive(h, steps[:cut])
    before = h.output.records_with_timestamps()
    snap = h.op.snapshot_state(1)
    assert isinstance(snap, OperatorSnapshot) and callable(snap.keyed)
    drive(h, steps[cut : cut + 4])  # updates after the synchronous part must not reach the snapshot
    # both parts built now, after the original went on (a RocksDB checkpoint's files are native)
    snap = OperatorSnapshot(keyed=snap.materialize_keyed(), native=snap.materialize_native())
    h.op.close()
    keyed = keyed_entries(snap)
    restored = through_state_files(snap, str(tmp_path / "cp"), key_group_range)
    h2 = Harness(make_op(), backend=OTHER[backend], now=now_after(steps[:cut]), restore=restored, key_group_range=key_group_range)
    drive(h2, steps[cut:])
    after = h2.output.records_with_timestamps()
    h2.close()
    return sorted(map(repr, before + after)), keyed


def uninterrupted(make_op, steps, backend="hashmap"):
    h = Harness(make_op(), backend=backend, now=1000)
    drive(h, steps)
    h.close()
    return records(h)


def gen(seed, n=240, keys="abcdefghijklmnop", bound=12):
    rnd = random.Random(seed)
    t, out = 1000, []
    for _ in range(n):
        t += rnd.randint(0, 5)
        out.append((rnd.choice(keys), rnd.randint(1, 9), t - rnd.randint(0, bound)))
    return out


# --------------------------------------------------------------------------- keyed process
class Sessionize(KeyedProcessFunction):
    """Value, list and map state, an event-time timeout timer and a processing-time report timer."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.values = runtime_context.get_list_state(ListStateDescriptor("values"))
        self.per_value = runtime_context.get_map_state(MapStateDescriptor("per-value"))
        self.last = runtime_context.get_state(ValueStateDescriptor("last"))

    def process_element(self, value, ctx):
        key, v, ts = value
        self.count.update((self.count.value() or 0) + 1)
        self.values.add(v)  # appended in place on the heap
        self.per_value.put(v, (self.per_value.get(v) or 0) + 1)
        self.last.update(ts)
        ctx.timer_service().register_event_time_timer(ts + 20)
        ctx.timer_service().register_processing_time_timer((ctx.timer_service().current_processing_time() // 50 + 1) * 50)
        return None

    def on_timer(self, timestamp, ctx):
        key = ctx.get_current_key()
        if ctx.time_domain() == 0 and self.last.value() is not None and self.last.value() + 20 == timestamp:  # event time
            yield ("session", key, self.count.value(), sum(self.values.get()), sorted(self.per_value.items()))
            self.count.clear()
            self.values.clear()
            self.per_value.clear()
            self.last.clear()
        elif ctx.time_domain() != 0:
            yield ("report", key, timestamp, self.count.value())


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("cut", [5, 31])
def test_keyed_process_restored_mid_stream_equals_an_uninterrupted_run(backend, cut, tmp_path):
    from runtime.api.datastream.functions import TimeDomain

    assert TimeDomain.EVENT_TIME == 0
    steps = steps_of(gen(seed=cut))

    def make_op():
        return KeyedProcessOperator(lambda r: r[0], Sessionize())

    want = uninterrupted(make_op, steps)
    got, keyed = run_interrupted(make_op, steps, cut, backend, tmp_path)
    assert got == want
    assert any(r.startswith("(('session'") for r in want) and any(r.startswith("(('report'") for r in want)
    names = {name: kind for states in keyed.values() for name, (kind, _) in states.items()}
    assert names["values"] == "list" and names["per-value"] == "map" and names["count"] == "value"
    assert names["__timers__/user-timers/event"] == "timer" and names["__timers__/user-timers/processing"] == "timer"


def test_keyed_operator_restores_only_its_key_groups(tmp_path):
    steps = steps_of(gen(seed=3))

    def make_op():
        return KeyedProcessOperator(lambda r: r[0], Sessionize())

    h = Harness(make_op())
    drive(h, steps[:12])
    keyed = h.op.snapshot_state(1).materialize_keyed()
    keyed[0] = {"foreign": ("pane", [("x", 0, (1, False))])}  # an operator-internal kind: not backend state
    lo = KeyGroupRange(0, 63)
    # the full snapshot (not filtered by the runtime): foreign key groups must be ignored
    h2 = Harness(make_op(), key_group_range=lo, now=now_after(steps[:12]), restore=keyed)
    assert h2.op.keyed_state_backend.registered_state_names() and "foreign" not in h2.op.keyed_state_backend.registered_state_names()
    drive(h2, [("wm", MAX_TIMESTAMP), ("pt", 10**9)])
    keys = {value[1] for value in h2.output.values()}
    assert keys and all(assign_to_key_group(k, 128) <= 63 for k in keys)
    rest = h2.op.snapshot_state(2).materialize_keyed()
    assert rest == {} or all(kg in lo for kg in rest)


def test_a_snapshot_without_state_is_empty():
    h = Harness(KeyedProcessOperator(lambda r: r[0], Sessionize()))
    assert h.op.snapshot_state(1).materialize_keyed() == {}


# --------------------------------------------------------------------------- window operator
# changes its accumulator in place and returns it (legal): snapshots must not see later adds
MutatingAvg = AvgAgg


class Sum3(ReduceFunction):
    def reduce(self, a, b):
        return (a[0], a[1] + b[1], max(a[2], b[2]))


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (key, w.start, w.end, sorted(e[1] for e in elements))


WINDOW_CASES = {
    "tumbling-process": lambda: WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(40), None, ("process", Describe())),
    "sliding-aggregate-lateness": lambda: WindowOperator(
        lambda r: r[0], SlidingEventTimeWindows.of(60, 20), None, ("aggregate", MutatingAvg(), None), allowed_lateness=10
    ),
    "session-reduce": lambda: WindowOperator(lambda r: r[0], EventTimeSessionWindows.with_gap(8), None, ("reduce", Sum3(), None)),
    "session-count-trigger": lambda: WindowOperator(
        lambda r: r[0], EventTimeSessionWindows.with_gap(30), CountTrigger.of(3), ("process", Describe())
    ),
    "processing-time": lambda: WindowOperator(lambda r: r[0], TumblingProcessingTimeWindows.of(30), None, ("aggregate", MutatingAvg(), None)),
}


@pytest.mark.parametrize("case", list(WINDOW_CASES))
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_window_operator_restored_mid_stream_equals_an_uninterrupted_run(case, backend, tmp_path):
    steps = steps_of(gen(seed=len(case)))
    make_op = WINDOW_CASES[case]
    want = uninterrupted(make_op, steps)
    assert len(want) > 10
    got, keyed = run_interrupted(make_op, steps, 19, backend, tmp_path)
    assert got == want
    assert any(name.startswith("__timers__/window-timers/") for states in keyed.values() for name in states)


def test_window_operator_rescaled_from_one_to_two_subtasks(tmp_path):
    steps = steps_of(gen(seed=11))
    make_op = WINDOW_CASES["session-count-trigger"]
    want = uninterrupted(make_op, steps)
    h = Harness(make_op(), now=1000)
    drive(h, steps[:19])
    got = h.output.records_with_timestamps()
    keyed = h.op.snapshot_state(1).materialize_keyed()
    for i, rng in enumerate((KeyGroupRange(0, 63), KeyGroupRange(64, 127))):
        restored = through_state_files(keyed, str(tmp_path / str(i)), rng)
        assert restored and all(kg in rng for kg in restored)
        h2 = Harness(make_op(), key_group_range=rng, now=now_after(steps[:19]), restore=restored)
        mine = [
            (k, [e for e in a if assign_to_key_group(e[0], 128) in rng] if k == "batch" else a) for k, a in steps[19:]
        ]
        drive(h2, [s for s in mine if s[0] != "batch" or s[1]])
        got += h2.output.records_with_timestamps()
    assert sorted(map(repr, got)) == want


# --------------------------------------------------------------------------- columnar window
AGG = Aggregates.of(count=Count(), sum=Sum("value"), lo=Min("value"), hi=Max("value"))


def column_batches(seed, n_batches=16, batch=300, keys=40):
    rng = np.random.default_rng(seed)
    out, t = [], 10_000
    for _ in range(n_batches):
        ts = t + np.sort(rng.integers(0, 100, batch)) - rng.integers(0, 30, batch)
        t += 100
        cols = {"key": rng.integers(0, keys, batch).astype(np.int64), "value": rng.integers(-50, 1000, batch).astype(np.int64)}
        out.append((ColumnBatch(cols, ts.astype(np.int64)), int(ts.max()) - 31))
    return out


def col_rows(h):
    return sorted(tuple(r) for b in h.output.batches for r in zip(*(c.tolist() for c in b.columns.values())))


@pytest.mark.parametrize("lateness", [0, 150])
def test_columnar_window_restored_mid_stream_equals_an_uninterrupted_run(lateness, tmp_path):
    batches = column_batches(seed=lateness)

    def make_op():
        return ColumnarWindowAggregateOperator("key", SlidingEventTimeWindows.of(300, 100), AGG, allowed_lateness=lateness)

    whole = Harness(make_op())
    for b, wm in batches:
        whole.op.process_batch(b)
        whole.watermark(wm)
    whole.watermark(MAX_TIMESTAMP)

    h = Harness(make_op())
    for b, wm in batches[:8]:
        h.op.process_batch(b)
        h.watermark(wm)
    rows = col_rows(h)
    snap = h.op.snapshot_state(1)
    for b, wm in batches[8:11]:  # the original goes on: panes change after the synchronous part
        h.op.process_batch(b)
        h.watermark(wm)
    keyed = snap.materialize_keyed()
    assert {kind for states in keyed.values() for kind, _ in states.values()} == {"pane"}
    restored = through_state_files(keyed, str(tmp_path / "cp"), FULL)
    h2 = Harness(make_op(), restore=restored)
    h2.watermark(batches[7][1])
    for b, wm in batches[8:]:
        h2.op.process_batch(b)
        h2.watermark(wm)
    h2.watermark(MAX_TIMESTAMP)
    assert sorted(rows + col_rows(h2)) == col_rows(whole)


def test_columnar_processing_time_windows_are_armed_again_after_restore():
    def make_op():
        return ColumnarWindowAggregateOperator("key", TumblingProcessingTimeWindows.of(100), Aggregates.of(n=Count()))

    h = Harness(make_op(), now=1005)
    h.op.process_batch(ColumnBatch({"key": np.array([1, 2, 1], dtype=np.int64)}))
    keyed = h.op.snapshot_state(1).materialize_keyed()
    h2 = Harness(make_op(), now=1010, restore=keyed)
    assert h2.pts.pending == 1
    h2.advance_processing_time(1100)
    assert col_rows(h2) == [(1, 1000, 1100, 2), (2, 1000, 1100, 1)]


def test_columnar_snapshot_of_ten_thousand_keys_is_cheap():
    """10,000 keys x 3 pending windows: print what each part costs (no assertion on time)."""
    n = 10_000
    op = ColumnarWindowAggregateOperator("key", SlidingEventTimeWindows.of(300, 100), AGG)
    h = Harness(op)
    keys = np.arange(n, dtype=np.int64)
    for t in (10_000, 10_100, 10_200):
        h.op.process_batch(ColumnBatch({"key": keys, "value": keys % 97}, np.full(n, t, dtype=np.int64)))
    t0 = time.perf_counter()
    snap = h.op.snapshot_state(1)
    t1 = time.perf_counter()
    keyed = snap.materialize_keyed()
    t2 = time.perf_counter()
    h2 = Harness(ColumnarWindowAggregateOperator("key", SlidingEventTimeWindows.of(300, 100), AGG), restore=keyed)
    t3 = time.perf_counter()
    entries = sum(len(e) for states in keyed.values() for _, e in states.values())
    assert entries == 5 * n  # windows starting at 9800 ... 10200
    print(f"\ncolumnar snapshot of {entries} panes: sync {1000 * (t1 - t0):.1f} ms, supplier {1000 * (t2 - t1):.1f} ms, restore {1000 * (t3 - t2):.1f} ms")
    h.watermark(MAX_TIMESTAMP)
    h2.watermark(MAX_TIMESTAMP)
    assert col_rows(h2) == col_rows(h)
