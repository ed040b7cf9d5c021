from __future__ import annotations

import random
from collections import defaultdict

import pytest

from runtime.api.datastream.functions import AggregateFunction, ProcessWindowFunction, ReduceFunction, WindowFunction
from runtime.api.datastream.state import ValueStateDescriptor
from runtime.api.datastream.window import (
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    EventTimeSessionWindows,
    GlobalWindows,
    ProcessingTimeSessionWindows,
    PurgingTrigger,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from runtime.api.operators.window_operator import WindowOperator
from runtime.core.errors import MillraceError
from runtime.core.records import MAX_TIMESTAMP, Watermark
from tests.harness import Harness, through_state_files

pytestmark = pytest.mark.unit


# --------------------------------------------------------------------------- functions
class SumReduce(ReduceFunction):
    def reduce(self, a, b):
        return (a[0], a[1] + b[1], max(a[2], b[2]))


class AvgAgg(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        acc[0] += value[1]
        acc[1] += 1
        return acc

    def get_result(self, acc):
        return (acc[0], acc[1])

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


class Describe(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        els = list(elements)
        yield (key, w.start, w.end, sorted(e[1] for e in els) if isinstance(els[0], tuple) and len(els[0]) == 3 else els)


class SumsPerWindow(ProcessWindowFunction):
    def process(self, key, context, elements):
        w = context.window()
        yield (key, w.start, w.end, sum(e[1] for e in elements), len(list(elements)))


# --------------------------------------------------------------------------- data + references
def gen(seed=1, n=400, keys="abcd", bound=20, late_every=37):
    """Events (key, value, ts) with timestamps out of order within `bound`, plus some very late ones."""
    rnd = random.Random(seed)
    events = []
    t = 1000
    for i in range(n):
        t += rnd.randint(0, 6)
        ts = t - rnd.randint(0, bound)
        if late_every and i % late_every == late_every - 1:
            ts = t - bound - rnd.randint(60, 200)  # beyond the bound: probably late
        events.append((rnd.choice(keys), rnd.randint(1, 9), ts))
    return events


def batches_and_watermarks(events, bound=20, batch=25):
    """Split into batches; after each, the bounded-out-of-orderness watermark (max - bound - 1)."""
    out = []
    mx = -(1 << 62)
    for i in range(0, len(events), batch):
        b = events[i : i + batch]
        mx = max([mx] + [e[2] for e in b])
        out.append((b, mx - bound - 1))
    return out


def run(op, events, bound=20, backend="hashmap", close=True):
    h = Harness(op, backend=backend)
    for b, wm in batches_and_watermarks(events, bound):
        h.process([(k, v, ts) for k, v, ts in b], [e[2] for e in b])
        h.watermark(wm)
    h.watermark(MAX_TIMESTAMP)
    if close:
        h.close()
    return h


def reference_panes(events, assign, bound=20, lateness=0):
    """(key, window) -> elements, dropping elements whose window is late at arrival."""
    panes = defaultdict(list)
    wm = -(1 << 63)
    for b, next_wm in batches_and_watermarks(events, bound):
        for k, v, ts in b:
            for w in assign(ts):
                if w.end - 1 + lateness > wm:
                    panes[(k, w)].append((k, v, ts))
        wm = next_wm
    return panes


def tumbling(size, offset=0):
    return lambda ts: [TimeWindow(ts - (ts - offset) % size, ts - (ts - offset) % size + size)]


def sliding(size, slide):
    def f(ts):
        last = ts - ts % slide
        return [TimeWindow(s, s + size) for s in range(last, ts - size, -slide)]

    return f


def reference_sessions(events, gap, bound=20):
    """Simulate session merging with the watermark (Flink: MergingWindowSet + lateness)."""
    open_: dict[str, list[tuple[TimeWindow, list]]] = defaultdict(list)
    fired = []
    wm = -(1 << 63)
    for b, next_wm in batches_and_watermarks(events, bound):
        for k, v, ts in b:
            w = TimeWindow(ts, ts + gap)
            els = [(k, v, ts)]
            changed = True
            while changed:
                changed = False
                for s in list(open_[k]):
                    if s[0].intersects(w):
                        open_[k].remove(s)
                        w = w.cover(s[0])
                        els = s[1] + els
                        changed = True
            if w.end - 1 <= wm:
                continue  # late
            open_[k].append((w, els))
        wm = next_wm
        for k in open_:
            for s in [s for s in open_[k] if s[0].end - 1 <= wm]:
                open_[k].remove(s)
                fired.append((k, s[0], s[1]))
    for k in open_:
        fired.extend((k, s[0], s[1]) for s in open_[k])
    return fired


# --------------------------------------------------------------------------- tests
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_tumbling_reduce_matches_reference(backend):
    events = gen()
    h = run(WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(50), None, ("reduce", SumReduce(), None)), events, backend=backend)
    panes = reference_panes(events, tumbling(50))
    expected = sorted(((k, sum(e[1] for e in els), max(e[2] for e in els)), w.end - 1) for (k, w), els in panes.items())
    assert sorted(h.output.records_with_timestamps()) == expected
    assert h.op.num_late_records_dropped == len(events) - sum(len(v) for v in panes.values()) > 0
    # every output is emitted before the watermark that fired it
    seen_wm = -(1 << 63)
    for e in h.output.events:
        if isinstance(e, Watermark):
            seen_wm = e.timestamp
        else:
            assert all(t > seen_wm for t in e.timestamps.tolist())


def test_tumbling_with_offset():
    events = gen(seed=2, late_every=0)
    op = WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(30, 7), None, ("aggregate", AvgAgg(), None))
    h = run(op, events)
    panes = reference_panes(events, tumbling(30, 7))
    assert sorted(h.output.records_with_timestamps()) == sorted(((sum(e[1] for e in els), len(els)), w.end - 1) for (k, w), els in panes.items())
    assert all((t - 7 + 1) % 30 == 0 for _, t in h.output.records_with_timestamps())


def test_sliding_aggregate_with_process_matches_reference():
    events = gen(seed=3)
    op = WindowOperator(lambda r: r[0], SlidingEventTimeWindows.of(60, 20), None, ("aggregate", AvgAgg(), Describe()))
    h = run(op, events)
    panes = reference_panes(events, sliding(60, 20))
    expected = sorted(((k, w.start, w.end, [(sum(e[1] for e in els), len(els))]), w.end - 1) for (k, w), els in panes.items())
    assert sorted(h.output.records_with_timestamps()) == expected


def test_sliding_process_matches_reference():
    events = gen(seed=4)
    op = WindowOperator(lambda r: r[0], SlidingEventTimeWindows.of(45, 15), None, ("process", SumsPerWindow()))
    h = run(op, events, backend="rocksdb")
    panes = reference_panes(events, sliding(45, 15))
    expected = sorted(((k, w.start, w.end, sum(e[1] for e in els), len(els)), w.end - 1) for (k, w), els in panes.items())
    assert sorted(h.output.records_with_timestamps()) == expected


def test_reduce_with_window_function_apply():
    class Apply(WindowFunction):
        def apply(self, key, window, inputs):
            return [(key, window.start, list(inputs)[0][1])]

    events = gen(seed=5, late_every=0)
    h = run(WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(100), None, ("reduce", SumReduce(), Apply())), events)
    panes = reference_panes(events, tumbling(100))
    assert sorted(h.output.values()) == sorted((k, w.start, sum(e[1] for e in els)) for (k, w), els in panes.items())


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("spec", ["process", "aggregate", "reduce"])
def test_event_time_sessions_match_reference(backend, spec):
    events = gen(seed=6, n=300, keys="abc")
    gap = 9
    if spec == "process":
        fs = ("process", SumsPerWindow())
    elif spec == "aggregate":
        fs = ("aggregate", AvgAgg(), None)
    else:
        fs = ("reduce", SumReduce(), None)
    op = WindowOperator(lambda r: r[0], EventTimeSessionWindows.with_gap(gap), None, fs)
    h = run(op, events, backend=backend, close=False)
    ref = reference_sessions(events, gap)
    assert len(ref) > 20
    if spec == "process":
        expected = [((k, w.start, w.end, sum(e[1] for e in els), len(els)), w.end - 1) for k, w, els in ref]
    elif spec == "aggregate":
        expected = [((sum(e[1] for e in els), len(els)), w.end - 1) for k, w, els in ref]
    else:
        expected = [((k, sum(e[1] for e in els), max(e[2] for e in els)), w.end - 1) for k, w, els in ref]
    assert sorted(h.output.records_with_timestamps()) == sorted(expected)
    # nothing left behind: contents, merging sets and timers are all cleaned up
    backend_ = h.op.keyed_state_backend
    assert list(backend_.get_keys_and_namespaces("window-contents")) == []
    assert list(backend_.get_keys_and_namespaces("merging-window-set")) == []
    assert h.op._timers.num_event_time_timers() == 0
    h.close()


def test_session_bridge_merges_three_windows():
    op = WindowOperator(lambda r: r[0], EventTimeSessionWindows.with_gap(10), None, ("process", SumsPerWindow()))
    h = Harness(op)
    h.process([("k", 1, 0), ("k", 2, 15)], [0, 15])
    h.process([("k", 4, 8)], [8])  # [8,18) bridges [0,10) and [15,25)
    h.watermark(100)
    assert h.output.records_with_timestamps() == [(("k", 0, 25, 7, 3), 24)]


def test_allowed_lateness_refires_then_drops():
    op = WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(10), None, ("reduce", SumReduce(), None), allowed_lateness=5)
    h = Harness(op)
    h.process([("a", 1, 1), ("a", 2, 2)], [1, 2])
    h.watermark(9)
    assert h.output.records_with_timestamps() == [(("a", 3, 2), 9)]
    h.process([("a", 4, 3)], [3])  # late but within the allowed lateness: fires again at once
    assert h.output.records_with_timestamps()[-1] == (("a", 7, 3), 9)
    h.watermark(14)  # cleanup time 9 + 5
    h.process([("a", 8, 4)], [4])  # now too late
    h.watermark(MAX_TIMESTAMP)
    assert len(h.output.values()) == 2
    assert op.num_late_records_dropped == 1


def test_count_windows_tumbling_and_sliding():
    data = [(k, v, 0) for v, k in enumerate("abaabbaabab")]
    h = Harness(WindowOperator(lambda r: r[0], CountTumblingWindowAssigner.of(3), None, ("reduce", SumReduce(), None)))
    h.process(data)
    per_key = defaultdict(list)
    for k, v, _ in data:
        per_key[k].append(v)
    expected = [(k, sum(vs[i : i + 3])) for k, vs in per_key.items() for i in range(0, len(vs) - 2, 3)]
    assert sorted((k, s) for k, s, _ in h.output.values()) == sorted(expected)
    assert all(t == MAX_TIMESTAMP for _, t in h.output.records_with_timestamps())

    class Ids(ProcessWindowFunction):
        def process(self, key, context, elements):
            assert isinstance(context.window(), CountWindow)
            yield (key, [e[1] for e in elements])

    h = Harness(WindowOperator(lambda r: r[0], CountSlidingWindowAssigner.of(3, 1), None, ("process", Ids())))
    h.process(data)
    expected2 = [(k, vs[i - 2 : i + 1]) for k, vs in per_key.items() for i in range(2, len(vs))]
    assert sorted(h.output.values()) == sorted(expected2)


def test_global_windows_with_purging_count_trigger():
    op = WindowOperator(lambda r: r % 2, GlobalWindows.create(), PurgingTrigger.of(CountTrigger.of(2)), ("reduce", lambda a, b: a + b, None))
    h = Harness(op)
    h.process(list(range(9)))
    assert h.output.values() == [0 + 2, 1 + 3, 4 + 6, 5 + 7]


def test_processing_time_tumbling_and_sliding_windows():
    h = Harness(WindowOperator(lambda r: r[0], TumblingProcessingTimeWindows.of(10), None, ("process", Describe())), now=1003)
    h.process([("a", 1), ("b", 2)])
    h.advance_processing_time(1007)
    h.process([("a", 3)])
    assert h.output.batches == []
    h.advance_processing_time(1012)
    h.process([("a", 5)])
    assert sorted(h.output.records_with_timestamps()) == [(("a", 1000, 1010, [("a", 1), ("a", 3)]), 1009), (("b", 1000, 1010, [("b", 2)]), 1009)]
    h.advance_processing_time(1030)
    assert h.output.records_with_timestamps()[-1] == (("a", 1010, 1020, [("a", 5)]), 1019)

    h = Harness(WindowOperator(lambda r: r[0], SlidingProcessingTimeWindows.of(20, 10), None, ("process", Describe())), now=1005)
    h.process([("a", 1)])
    h.advance_processing_time(1015)
    h.process([("a", 2)])
    h.advance_processing_time(1100)
    got = sorted((s, e, els) for _, s, e, els in h.output.values())
    assert got == [(990, 1010, [("a", 1)]), (1000, 1020, [("a", 1), ("a", 2)]), (1010, 1030, [("a", 2)])]


def test_processing_time_sessions():
    h = Harness(WindowOperator(lambda r: r[0], ProcessingTimeSessionWindows.with_gap(10), None, ("process", Describe())), now=0)
    h.process([("a", 1)])
    h.advance_processing_time(5)
    h.process([("a", 2)])  # extends the session to [0, 15)
    h.advance_processing_time(12)
    assert h.output.batches == []
    h.advance_processing_time(14)
    assert h.output.values() == [("a", 0, 15, [("a", 1), ("a", 2)])]


def test_process_window_function_state_and_clear():
    class Fires(ProcessWindowFunction):
        def process(self, key, context, elements):
            ws = context.window_state().get_state(ValueStateDescriptor("fires"))
            gs = context.global_state().get_state(ValueStateDescriptor("total"))
            ws.update((ws.value() or 0) + 1)
            gs.update((gs.value() or 0) + 1)
            yield (key, context.window().start, ws.value(), gs.value(), context.current_watermark())

        def clear(self, context):
            context.window_state().get_state(ValueStateDescriptor("fires")).clear()

    op = WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(10), None, ("process", Fires()), allowed_lateness=100)
    h = Harness(op)
    h.process([("a", 1, 1)], [1])
    h.watermark(10)
    h.process([("a", 2, 2)], [2])  # late firing of the same window
    h.process([("a", 3, 12)], [12])
    h.watermark(1000)
    assert h.output.values() == [("a", 0, 1, 1, 10), ("a", 0, 2, 2, 10), ("a", 10, 1, 3, 1000)]
    assert list(op.keyed_state_backend.get_keys_and_namespaces("fires")) == []


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_batch_path_sends_late_elements_aside_and_clears_windows(backend):
    """Event-time tumbling windows with the default trigger take the batch path: late elements go to
    the late-data side output, and a user's ProcessWindowFunction.clear runs for every fired window."""
    cleared = []

    class Sizes(ProcessWindowFunction):
        def process(self, key, context, elements):
            seen = context.window_state().get_state(ValueStateDescriptor("seen"))
            seen.update(len(list(elements)))
            yield (key, context.window().start, seen.value())

        def clear(self, context):
            cleared.append((context.window().start, context.window_state().get_state(ValueStateDescriptor("seen")).value()))
            context.window_state().get_state(ValueStateDescriptor("seen")).clear()

    op = WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(10), None, ("process", Sizes()), late_data_tag="late")
    h = Harness(op, backend=backend)
    assert op._fast_batch
    h.process([("a", 1, 1), ("b", 1, 3), ("a", 2, 5)], [1, 3, 5])
    h.watermark(9)
    h.process([("a", 3, 4), ("a", 4, 12), ("b", 5, 9)], [4, 12, 9])  # 4 and 9 are late: [0, 10) fired
    h.watermark(MAX_TIMESTAMP)
    assert h.output.values() == [("a", 0, 2), ("b", 0, 1), ("a", 10, 1)]
    assert [v for b in h.output.side["late"] for v in b.rows()] == [("a", 3, 4), ("b", 5, 9)]
    assert cleared == [(0, 2), (0, 1), (10, 1)]
    assert list(op.keyed_state_backend.get_keys_and_namespaces("seen")) == []


def test_batch_path_reduce_functions_with_keyed_state_see_each_records_key():
    """A window's reduce function keeping keyed state of its own: the batch path sets each record's
    key, also after timers of another key fired."""

    class CountingReduce(ReduceFunction):
        def open(self, rc):
            self.n = rc.get_state(ValueStateDescriptor("n"))

        def reduce(self, x, y):
            self.n.update((self.n.value() or 0) + 1)
            return (x[0], x[1] + y[1], x[2])

    op = WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(10), None, ("reduce", CountingReduce(), None))
    h = Harness(op)
    h.process([(2, 1, 1), (2, 1, 2), (2, 1, 3)], [1, 2, 3])
    h.watermark(10)  # key 2's window fires: the backend's key was 2
    h.process([(1, 1, 11), (1, 1, 12), (1, 1, 13)], [11, 12, 13])
    backend = op.keyed_state_backend
    counts = {}
    for key in (1, 2):
        backend.set_current_key(key)
        counts[key] = op.runtime_context.get_state(ValueStateDescriptor("n")).value()
    assert counts == {1: 2, 2: 2}


def test_missing_timestamp_is_explained():
    h = Harness(WindowOperator(lambda r: r, TumblingEventTimeWindows.of(10), None, ("reduce", lambda a, b: a, None)))
    with pytest.raises(MillraceError, match="assign_timestamps_and_watermarks"):
        h.process([1, 2])


def test_nothing_fires_in_finish_without_the_final_watermark():
    h = Harness(WindowOperator(lambda r: r[0], TumblingEventTimeWindows.of(10), None, ("reduce", SumReduce(), None)))
    h.process([("a", 1, 1)], [1])
    h.op.finish()
    assert h.output.batches == []
    h.watermark(MAX_TIMESTAMP)
    assert h.output.values() == [("a", 1, 1)]


def test_window_operator_snapshot_restore_rescaled(tmp_path):
    events = gen(seed=9, n=200, keys="abcdefghij", late_every=0)
    first, second = events[:100], events[100:]
    op = WindowOperator(lambda r: r[0], EventTimeSessionWindows.with_gap(15), None, ("process", SumsPerWindow()))
    h = Harness(op)
    h.process([(k, v, ts) for k, v, ts in first], [e[2] for e in first])
    snap = op.snapshot_state(1).materialize_keyed()
    h.close()
    out = []
    from runtime.core.keygroups import KeyGroupRange

    for rng in (KeyGroupRange(0, 63), KeyGroupRange(64, 127)):
        op2 = WindowOperator(lambda r: r[0], EventTimeSessionWindows.with_gap(15), None, ("process", SumsPerWindow()))
        restored = through_state_files(snap, str(tmp_path / f"{rng.start}"), rng)  # as checkpoint rows, like a restore
        h2 = Harness(op2, key_group_range=rng, restore=restored, backend="rocksdb")
        from runtime.core.keygroups import assign_to_key_group

        mine = [e for e in second if assign_to_key_group(e[0], 128) in rng]
        h2.process([(k, v, ts) for k, v, ts in mine], [e[2] for e in mine])
        h2.watermark(MAX_TIMESTAMP)
        out.extend(h2.output.values())
        h2.close()
    h_ref = Harness(WindowOperator(lambda r: r[0], EventTimeSessionWindows.with_gap(15), None, ("process", SumsPerWindow())))
    h_ref.process([(k, v, ts) for k, v, ts in events], [e[2] for e in events])
    h_ref.watermark(MAX_TIMESTAMP)
    assert sorted(out) == sorted(h_ref.output.values())


def test_assigners_accept_time_objects_and_ints():
    from runtime.api.common.time import Duration, Time

    assert TumblingEventTimeWindows.of(Time.seconds(1)).size == 1000
    s = SlidingEventTimeWindows.of(Time.milliseconds(60), Duration.of_millis(20), Time.milliseconds(5))
    assert (s.size, s.slide, s.offset) == (60, 20, 5)
    assert EventTimeSessionWindows.with_gap(Time.minutes(1)).session_gap == 60_000
    assert TumblingProcessingTimeWindows.of(250).size == 250
    # Flink's getWindowStartWithOffset, negative timestamps included
    assert TimeWindow.get_window_start_with_offset(-3, 0, 10) == -10
    assert TimeWindow.get_window_start_with_offset(17, 5, 10) == 15
    assert TimeWindow(0, 10).max_timestamp() == 9
    assert TimeWindow(0, 10).intersects(TimeWindow(10, 20)) and TimeWindow(0, 10).cover(TimeWindow(5, 30)) == TimeWindow(0, 30)
