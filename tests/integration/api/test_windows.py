"""Windows and event time as real jobs on the shared MiniCluster, against plain-Python references.

Inputs come from parallel sources whose subtasks each emit ascending timestamps (or, for the
out-of-orderness test, records shuffled within a bound), so with the chosen watermark strategy no
record is late and every window's content is exactly the reference's.
"""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from runtime.api.common import Duration, Time, TimestampAssigner, Types, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import (
    AggregateFunction,
    Aggregates,
    Count,
    EventTimeSessionWindows,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    MapStateDescriptor,
    Max,
    Min,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    Sum,
    TumblingEventTimeWindows,
    ValueStateDescriptor,
    WindowFunction,
)
from runtime.deploy.minicluster import MiniCluster
from tests.integration.api._data import (
    COL_N,
    OOO_BATCH,
    OOO_BLOCK,
    OOO_EVENTS,
    OOO_N,
    RECORDS,
    SESSION_EVENTS,
    SESSION_GAP,
    col_batch,
    col_row,
    col_rows,
    env_p,
    ooo_event,
    ooo_ts,
    records_source,
    reference_sessions,
    session_event,
)


def tumbling_reference(size: int) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = defaultdict(list)
    for k, v, t in RECORDS:
        out[(k, t - t % size)].append(v)
    return out


def sliding_reference(size: int, slide: int) -> dict[tuple[str, int], list[int]]:
    out: dict[tuple[str, int], list[int]] = defaultdict(list)
    for k, v, t in RECORDS:
        start = t - t % slide
        while start > t - size:
            out[(k, start)].append(v)
            start -= slide
    return out


# -- window functions -------------------------------------------------------------------------------


class CountSum(AggregateFunction):
    """(key, count, sum); merge for session windows."""

    def create_accumulator(self):
        return [None, 0, 0]

    def add(self, value, acc):
        return [value[0], acc[1] + 1, acc[2] + value[1]]

    def get_result(self, acc):
        return (acc[0], acc[1], acc[2])

    def merge(self, a, b):
        return [a[0] or b[0], a[1] + b[1], a[2] + b[2]]


class WithWindow(ProcessWindowFunction):
    """Wraps the single pre-aggregated result with the key and the window bounds."""

    def process(self, key, context, elements):
        (only,) = list(elements)
        w = context.window()
        yield (key, w.start, w.end, only[1], only[2])


class AllElements(ProcessWindowFunction):
    """Full window contents: key, bounds, count, sorted values; checks current_watermark."""

    def process(self, key, context, elements):
        w = context.window()
        vals = sorted(e[1] for e in elements)
        assert context.current_watermark() >= w.end - 1
        yield (key, w.start, w.end, len(vals), tuple(vals))


class ApplyMax(WindowFunction):
    def apply(self, key, window, inputs):
        yield (key, window.start, max(i[1] for i in inputs))


def test_tumbling_event_time_window_reduce(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(1000)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], min(a[2], b[2])))
        .execute_and_collect()
    )
    expected = {(k, s, sum(vs)) for (k, s), vs in tumbling_reference(1000).items()}
    result = Counter((k, t - t % 1000, v) for k, v, t in got)
    assert result == Counter(expected)


def test_tumbling_window_reduce_with_process_window_function(cluster_env: MiniCluster) -> None:
    class Tag(ProcessWindowFunction):
        def process(self, key, context, elements):
            (r,) = list(elements)
            yield (key, context.window().start, context.window().end, r[1])

    env = env_p(3)
    got = (
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(700)))
        .reduce(lambda a, b: (a[0], max(a[1], b[1]), 0), window_function=Tag())
        .execute_and_collect()
    )
    expected = [(k, s, s + 700, max(vs)) for (k, s), vs in tumbling_reference(700).items()]
    assert Counter(got) == Counter(expected)


def test_sliding_event_time_window_aggregate(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(SlidingEventTimeWindows.of(Time.milliseconds(2000), Time.milliseconds(500)))
        .aggregate(CountSum())
        .execute_and_collect()
    )
    ref = sliding_reference(2000, 500)
    assert Counter(got) == Counter((k, len(vs), sum(vs)) for (k, _), vs in ref.items())


def test_sliding_event_time_window_aggregate_with_process_window_function(cluster_env: MiniCluster) -> None:
    env = env_p(3)
    got = list(
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(SlidingEventTimeWindows.of(Time.milliseconds(2000), Time.milliseconds(500)))
        .aggregate(CountSum(), window_function=WithWindow())
        .execute_and_collect()
    )
    ref = sliding_reference(2000, 500)
    expected = [(k, s, s + 2000, len(vs), sum(vs)) for (k, s), vs in ref.items()]
    assert sorted(got) == sorted(expected)
    # windows that start before the first record (negative starts) are there too
    assert any(s < 0 for _, s, *_ in got)


def test_tumbling_window_process_reads_the_window(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(1500)))
        .process(AllElements())
        .execute_and_collect()
    )
    expected = [(k, s, s + 1500, len(vs), tuple(sorted(vs))) for (k, s), vs in tumbling_reference(1500).items()]
    assert sorted(got) == sorted(expected)


def test_tumbling_window_apply_window_function(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(1000))
        .apply(ApplyMax())
        .execute_and_collect()
    )
    assert Counter(got) == Counter((k, s, max(vs)) for (k, s), vs in tumbling_reference(1000).items())


def test_window_all_tumbling_reduce(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env, event_time=True)
        .map(lambda r: (r[2] - r[2] % 1000, r[1]))
        .window_all(TumblingEventTimeWindows.of(1000))
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .execute_and_collect()
    )
    ref: dict[int, int] = defaultdict(int)
    for _, v, t in RECORDS:
        ref[t - t % 1000] += v
    assert sorted(got) == sorted(ref.items())


class _SumAll:  # both PyFlink base classes, as a program subclasses them
    @staticmethod
    def process_class():
        from runtime.api.datastream.functions import ProcessAllWindowFunction

        class SumPerWindow(ProcessAllWindowFunction):
            def process(self, context, elements):
                yield (context.window().start, sum(v for _, v in elements))

        return SumPerWindow()

    @staticmethod
    def apply_class():
        from runtime.api.datastream.functions import AllWindowFunction

        class CountPerWindow(AllWindowFunction):
            def apply(self, window, inputs):
                yield (window.start, len(list(inputs)))

        return CountPerWindow()


def test_window_all_process_and_apply_take_pyflinks_all_window_functions(cluster_env: MiniCluster) -> None:
    """ProcessAllWindowFunction and AllWindowFunction at PyFlink's path (datastream.functions)."""
    env = env_p(2)
    windows = records_source(env, event_time=True).map(lambda r: (r[2], r[1])).window_all(TumblingEventTimeWindows.of(1000))
    got_sum = windows.process(_SumAll.process_class(), Types.TUPLE([Types.LONG(), Types.LONG()])).execute_and_collect()
    env = env_p(2)
    windows = records_source(env, event_time=True).map(lambda r: (r[2], r[1])).window_all(TumblingEventTimeWindows.of(1000))
    got_count = windows.apply(_SumAll.apply_class()).execute_and_collect()
    sums: dict[int, int] = defaultdict(int)
    counts: Counter[int] = Counter()
    for _, v, t in RECORDS:
        sums[t - t % 1000] += v
        counts[t - t % 1000] += 1
    assert sorted(got_sum) == sorted(sums.items()) and sorted(got_count) == sorted(counts.items())


# -- session windows ------------------------------------------------------------------------------


def _session_source(env):
    src = DataGeneratorSource(session_event, len(SESSION_EVENTS), batch_size=40)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    return env.from_source(src, strategy, "sessions")


def test_session_windows_reduce_aggregate_and_process(cluster_env: MiniCluster) -> None:
    ref = reference_sessions(SESSION_EVENTS, SESSION_GAP)
    assert 20 < len(ref) < len(SESSION_EVENTS) // 3  # real sessions, several per key

    env = env_p(2)
    keyed = _session_source(env).key_by(lambda e: e[0])
    got_reduce = (
        keyed.window(EventTimeSessionWindows.with_gap(Time.milliseconds(SESSION_GAP)))
        .reduce(lambda a, b: (a[0], a[1] + b[1], min(a[2], b[2])))
        .execute_and_collect()
    )
    assert Counter((k, t, v) for k, v, t in got_reduce) == Counter((k, s, sum(vs)) for (k, s, _), vs in ref.items())

    env = env_p(3)
    got_agg = (
        _session_source(env)
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(SESSION_GAP))
        .aggregate(CountSum(), window_function=WithWindow())
        .execute_and_collect()
    )
    assert sorted(got_agg) == sorted((k, s, e, len(vs), sum(vs)) for (k, s, e), vs in ref.items())

    env = env_p(2)
    got_proc = (
        _session_source(env)
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(SESSION_GAP))
        .process(AllElements())
        .execute_and_collect()
    )
    assert sorted(got_proc) == sorted((k, s, e, len(vs), tuple(sorted(vs))) for (k, s, e), vs in ref.items())


# -- count windows -------------------------------------------------------------------------------------


def test_count_windows_tumbling_and_sliding(cluster_env: MiniCluster) -> None:
    """A non-parallel source keeps each key's order, so count windows are exact; the windows run
    on 2 subtasks. Incomplete count windows never fire (Flink: CountTrigger)."""
    data = [(f"k{i % 3}", i) for i in range(301)]
    per_key: dict[str, list[int]] = defaultdict(list)
    for k, v in data:
        per_key[k].append(v)

    env = env_p(2)
    got = env.from_collection(data).key_by(lambda r: r[0]).count_window(7).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    expected = [(k, sum(vs[i : i + 7])) for k, vs in per_key.items() for i in range(0, len(vs) - 6, 7)]
    assert Counter(got) == Counter(expected)

    class Collect(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (key, context.window().id, tuple(e[1] for e in elements))

    env = env_p(2)
    got = env.from_collection(data).key_by(lambda r: r[0]).count_window(5, 2).process(Collect()).execute_and_collect()
    # window id w holds elements w*2 .. w*2+4 (per key, 0-based) and fires when full
    expected = [(k, w, tuple(vs[w * 2 : w * 2 + 5])) for k, vs in per_key.items() for w in range(0, (len(vs) - 5) // 2 + 1)]
    assert Counter(got) == Counter(expected)


# -- columnar window aggregate vs the per-record WindowOperator ---------------------------------------------


def double_v(cols):
    return {"k": cols["k"], "v": cols["v"] * 2, "ts": cols["ts"]}


class ColumnarLikeResult(ProcessWindowFunction):
    def process(self, key, context, elements):
        (r,) = list(elements)
        yield (key, context.window().start, context.window().end, *r[1:])


class CountSumMinMaxByField(AggregateFunction):
    """The per-record twin of Aggregates.of(count=Count(), sum=Sum("v"), lo=Min("v"), hi=Max("v"))."""

    def create_accumulator(self):
        return [None, 0, 0, None, None]

    def add(self, value, acc):
        v = value["v"]
        return [value["k"], acc[1] + 1, acc[2] + v, v if acc[3] is None else min(acc[3], v), v if acc[4] is None else max(acc[4], v)]

    def get_result(self, acc):
        return tuple(acc)


def _columnar_source(env):
    src = DataGeneratorSource(None, COL_N, batch_generator=col_batch, batch_size=200)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts"))
    return env.from_source(src, strategy, "columns").map_batches(double_v)


def _row_source(env):
    """The same data as named Rows with string keys (ObjectBatches, not columns)."""
    src = DataGeneratorSource(col_row, COL_N, batch_size=150)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r.ts)
    return env.from_source(src, strategy, "rows")


WINDOWS = {
    "tumbling": (1000, 1000, 0),
    "tumbling-offset": (1000, 1000, 250),
    "sliding": (1000, 250, 0),
    "sliding-uneven": (1000, 300, 0),
}


def _assigner(name: str):
    size, slide, offset = WINDOWS[name]
    if size == slide:
        return TumblingEventTimeWindows.of(size, offset)
    return SlidingEventTimeWindows.of(size, slide, offset)


@pytest.mark.parametrize("window", list(WINDOWS))
@pytest.mark.parametrize("input_kind", ["columns", "rows"])
def test_columnar_window_aggregate_equals_per_record_window_operator(cluster_env: MiniCluster, window: str, input_kind: str) -> None:
    source = _columnar_source if input_kind == "columns" else _row_source
    env = env_p(2)
    columnar = list(
        source(env)
        .key_by("k")
        .window(_assigner(window))
        .aggregate(Aggregates.of(count=Count(), sum=Sum("v"), lo=Min("v"), hi=Max("v")))
        .set_parallelism(3)
        .execute_and_collect()
    )
    env = env_p(2)
    per_record = list(
        source(env)
        .key_by(lambda r: r["k"])
        .window(_assigner(window))
        .aggregate(CountSumMinMaxByField(), window_function=ColumnarLikeResult())
        .set_parallelism(3)
        .execute_and_collect()
    )
    size, slide, offset = WINDOWS[window]
    ref: dict[tuple, list[int]] = defaultdict(list)
    for r in col_rows():
        k = r["k"] if input_kind == "columns" else f"key{r['k']}"
        v = r["v"] * 2 if input_kind == "columns" else r["v"]
        t = r["ts"]
        start = t - (t - offset) % slide
        while start > t - size:
            ref[(k, start)].append(v)
            start -= slide
    expected = sorted((k, s, s + size, len(vs), sum(vs), min(vs), max(vs)) for (k, s), vs in ref.items())
    got_columnar = sorted((r["k"], r["window_start"], r["window_end"], r["count"], r["sum"], r["lo"], r["hi"]) for r in columnar)
    assert got_columnar == expected
    assert sorted(per_record) == expected


# -- watermarks: bounded out-of-orderness --------------------------------------------------------------------


def per_batch_watermarks(env):
    """A watermark after every source batch (pipeline.auto-watermark-interval 0), which the
    references below simulate: which records are late is then fixed, not a matter of timing."""
    env.get_config().set_auto_watermark_interval(0)
    return env


def _ooo_window_counts(bound_ms: int, source_parallelism: int = 2):
    env = per_batch_watermarks(env_p(2))
    src = DataGeneratorSource(ooo_event, OOO_N, batch_size=OOO_BATCH)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(bound_ms)).with_timestamp_assigner(ooo_ts)
    return list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "shuffled")
        .set_parallelism(source_parallelism)
        .assign_timestamps_and_watermarks(strategy)
        .set_parallelism(source_parallelism)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(100))
        .aggregate(CountSum(), window_function=WithWindow())
        .execute_and_collect()
    )


def test_bounded_out_of_orderness_counts_late_records_within_the_bound(cluster_env: MiniCluster) -> None:
    ref: dict[tuple[str, int], int] = Counter()
    for k, t in OOO_EVENTS:
        ref[(k, t - t % 100)] += 1
    # the input really is out of order, by up to a block (300 ms) but no more
    ts = [t for _, t in OOO_EVENTS]
    assert any(b < a for a, b in zip(ts, ts[1:]))
    assert max(max(ts[: i + 1]) - ts[i] for i in range(len(ts))) < OOO_BLOCK * 10

    got = _ooo_window_counts(OOO_BLOCK * 10)
    assert sorted((k, s, n) for k, s, _, n, _ in got) == sorted((k, s, n) for (k, s), n in ref.items())
    assert sum(n for *_, n, _ in got) == OOO_N



def test_without_out_of_orderness_bound_records_behind_the_watermark_are_dropped(cluster_env: MiniCluster) -> None:
    """One source subtask (so one watermark sequence reaches the windows): the watermark follows
    each source batch (max timestamp so far - 1); a record whose window already ended at or
    before the current watermark is dropped (Flink: late element, allowed lateness 0)."""
    kept: dict[tuple[str, int], int] = Counter()
    wm = None
    for b in range(0, OOO_N, OOO_BATCH):
        batch = OOO_EVENTS[b : b + OOO_BATCH]
        for k, t in batch:
            s = t - t % 100
            if wm is None or s + 99 > wm:
                kept[(k, s)] += 1
        m = max(t for _, t in batch) - 1
        wm = m if wm is None else max(wm, m)
    assert sum(kept.values()) < OOO_N * 0.9  # the reference does drop records

    got = _ooo_window_counts(0, source_parallelism=1)
    assert sorted((k, s, n) for k, s, _, n, _ in got) == sorted((k, s, n) for (k, s), n in kept.items() if n)


# -- more event time: merging out-of-order sessions, allowed lateness, window state, two-input timers -----------


def test_session_windows_merge_out_of_order_records(cluster_env: MiniCluster) -> None:
    """Records shuffled within blocks: an arriving record can bridge two existing session windows
    of its key, which must then merge (state and timers). With a bound covering the disorder no
    record is late, so the sessions equal the sorted reference."""
    from tests.integration.api._data import SHUFFLED_SESSION_EVENTS, max_disorder_ms, shuffled_session_event

    disorder = max_disorder_ms([t for _, _, t in SHUFFLED_SESSION_EVENTS])
    assert disorder > 2 * SESSION_GAP  # the shuffle really reorders across session gaps
    env = env_p(2)
    src = DataGeneratorSource(shuffled_session_event, len(SHUFFLED_SESSION_EVENTS), batch_size=8)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(disorder + 1).with_timestamp_assigner(lambda e, _: e[2])
    got = list(
        env.from_source(src, strategy, "shuffled sessions")
        .key_by(lambda e: e[0])
        .window(EventTimeSessionWindows.with_gap(SESSION_GAP))
        .aggregate(CountSum(), window_function=WithWindow())
        .set_parallelism(3)
        .execute_and_collect()
    )
    ref = reference_sessions(SESSION_EVENTS, SESSION_GAP)
    assert sorted(got) == sorted((k, s, e, len(vs), sum(vs)) for (k, s, e), vs in ref.items())


def _lateness_reference(bound: int, lateness: int, size: int) -> Counter:
    """Flink's WindowOperator + EventTimeTrigger, with the watermark after every source batch
    (max timestamp so far - bound - 1): a window fires when the watermark passes its end, a record
    for a window that already fired but is within the allowed lateness fires it again at once,
    records behind end + lateness are dropped. Output: (key, window start, count at firing)."""
    counts: dict[tuple[str, int], int] = defaultdict(int)
    timer: set[tuple[str, int]] = set()
    out: Counter = Counter()
    wm = None
    max_ts = None
    for b in range(0, OOO_N, OOO_BATCH):
        batch = OOO_EVENTS[b : b + OOO_BATCH]
        for k, t in batch:
            s = t - t % size
            end_ts = s + size - 1
            if wm is not None and end_ts + lateness <= wm:
                continue  # dropped
            counts[(k, s)] += 1
            if wm is not None and end_ts <= wm:
                out[(k, s, counts[(k, s)])] += 1  # late but allowed: fires at once
            else:
                timer.add((k, s))
        max_ts = max(t for _, t in batch) if max_ts is None else max(max_ts, max(t for _, t in batch))
        new_wm = max_ts - bound - 1
        wm = new_wm if wm is None else max(wm, new_wm)
        for k, s in sorted(timer):
            if s + size - 1 <= wm:
                out[(k, s, counts[(k, s)])] += 1
                timer.discard((k, s))
    for k, s in timer:  # end of input: MAX watermark
        out[(k, s, counts[(k, s)])] += 1
    return out


def test_allowed_lateness_refires_windows_for_late_records(cluster_env: MiniCluster) -> None:
    lateness = 150
    env = per_batch_watermarks(env_p(2))
    src = DataGeneratorSource(ooo_event, OOO_N, batch_size=OOO_BATCH)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(0).with_timestamp_assigner(ooo_ts)
    got = list(
        env.from_source(src, strategy, "shuffled")
        .set_parallelism(1)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(100))
        .allowed_lateness(lateness)
        .aggregate(CountSum(), window_function=WithWindow())
        .execute_and_collect()
    )
    expected = _lateness_reference(0, lateness, 100)
    no_lateness = _lateness_reference(0, 0, 100)
    # the scenario matters: some windows fire more than once, and lateness keeps records
    assert sum(expected.values()) > len({(k, s) for k, s, _ in expected})
    assert Counter((k, s, n) for k, s, _, n, _ in got) == expected
    assert expected != no_lateness


class FiringsWithState(ProcessWindowFunction):
    """global_state counts firings per key across windows; window_state counts firings of one
    window (cleared by clear() when the window is purged)."""

    def process(self, key, context, elements):
        g = context.global_state().get_state(ValueStateDescriptor("windows-of-key", Types.LONG()))
        n = (g.value() or 0) + 1
        g.update(n)
        ws = context.window_state().get_state(ValueStateDescriptor("firings", Types.LONG()))
        f = (ws.value() or 0) + 1
        ws.update(f)
        yield (key, context.window().start, n, f, sum(1 for _ in elements))

    def clear(self, context):
        context.window_state().get_state(ValueStateDescriptor("firings", Types.LONG())).clear()


def test_process_window_function_window_and_global_state(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = list(
        records_source(env, event_time=True)
        .key_by(lambda r: r[0])
        .window(TumblingEventTimeWindows.of(1000))
        .process(FiringsWithState())
        .execute_and_collect()
    )
    ref = tumbling_reference(1000)
    expected = []
    for k in {k for k, _ in ref}:
        starts = sorted(s for kk, s in ref if kk == k)
        expected += [(k, s, i, 1, len(ref[(k, s)])) for i, s in enumerate(starts, start=1)]
    assert sorted(got) == sorted(expected)


class BucketJoinCounts(KeyedCoProcessFunction):
    """Per key and 500 ms bucket: how many records came on each input, emitted by an event-time
    timer; the operator's watermark is the minimum of both inputs' watermarks."""

    def open(self, runtime_context) -> None:
        self.counts = runtime_context.get_map_state(MapStateDescriptor("counts", Types.PICKLED_BYTE_ARRAY(), Types.LONG()))

    def _add(self, side, ctx):
        b = ctx.timestamp() // 500
        self.counts.put((b, side), (self.counts.get((b, side)) or 0) + 1)
        ctx.timer_service().register_event_time_timer(b * 500 + 499)

    def process_element1(self, value, ctx):
        self._add(1, ctx)

    def process_element2(self, value, ctx):
        self._add(2, ctx)

    def on_timer(self, timestamp, ctx):
        assert ctx.time_domain() == 0  # TimeDomain.EVENT_TIME
        assert ctx.timer_service().current_watermark() >= timestamp
        b = timestamp // 500
        n1 = self.counts.get((b, 1)) or 0
        n2 = self.counts.get((b, 2)) or 0
        self.counts.remove((b, 1))
        self.counts.remove((b, 2))
        yield (ctx.get_current_key(), b, n1, n2)


def test_keyed_co_process_function_event_time_timers_over_two_inputs(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    left = records_source(env, event_time=True)  # ts 0 .. 19990
    right_src = DataGeneratorSource(lambda i: (f"k{i % 7}", i, i * 25), 800, batch_size=40)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    right = env.from_source(right_src, strategy, "right").set_parallelism(3)
    got = list(
        left.connect(right)
        .key_by(lambda e: e[0], lambda e: e[0])
        .process(BucketJoinCounts())
        .execute_and_collect()
    )
    ref: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for k, _, t in RECORDS:
        ref[(k, t // 500)][0] += 1
    for i in range(800):
        ref[(f"k{i % 7}", i * 25 // 500)][1] += 1
    assert sorted(got) == sorted((k, b, n1, n2) for (k, b), (n1, n2) in ref.items())


def test_event_time_window_after_union_of_sources_with_different_parallelism(cluster_env: MiniCluster) -> None:
    """The window's watermark is the minimum over every channel of the union."""
    env = env_p(2)
    a = records_source(env, event_time=True)  # parallelism 2, ts 0..19990
    src_b = DataGeneratorSource(lambda i: (f"k{i % 4}", 1, i * 7), 1500, batch_size=60)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e[2])
    b = env.from_source(src_b, strategy, "b").set_parallelism(3)
    got = list(
        a.union(b)
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(1000))
        .aggregate(CountSum(), window_function=WithWindow())
        .execute_and_collect()
    )
    ref: dict[tuple[str, int], list[int]] = defaultdict(list)
    for k, v, t in RECORDS + [(f"k{i % 4}", 1, i * 7) for i in range(1500)]:
        ref[(k, t - t % 1000)].append(v)
    assert sorted(got) == sorted((k, s, s + 1000, len(vs), sum(vs)) for (k, s), vs in ref.items())


class InactivityTimeout(KeyedProcessFunction):
    """Per key: one pending event-time timer at last timestamp + gap; each record deletes the
    previous timer and sets a new one. A burst ends when its timer fires, or when a record comes
    after the pending timer's time before the watermark got there (the watermark may lag: it is
    the minimum over channels and follows whole batches) -- then the record closes the burst."""

    def open(self, runtime_context) -> None:
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))

    def process_element(self, value, ctx):
        old = self.timer.value()
        if old is not None:
            ctx.timer_service().delete_event_time_timer(old)
            if value[2] > old:
                yield (ctx.get_current_key(), old, self.count.value())
                self.count.clear()
        t = value[2] + SESSION_GAP
        self.timer.update(t)
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(t)

    def on_timer(self, timestamp, ctx):
        assert timestamp == self.timer.value()  # a deleted timer never fires
        n = self.count.value()
        self.count.clear()
        self.timer.clear()
        yield (ctx.get_current_key(), timestamp, n)


def test_keyed_process_function_deletes_event_time_timers(cluster_env: MiniCluster) -> None:
    """One source subtask, so each key's records arrive in timestamp order."""
    env = env_p(2)
    got = list(
        _session_source(env).set_parallelism(1).key_by(lambda e: e[0]).process(InactivityTimeout()).set_parallelism(3).execute_and_collect()
    )
    ref = reference_sessions(SESSION_EVENTS, SESSION_GAP)
    # a burst ends at its last record + gap: the session window's end
    assert sorted(got) == sorted((k, e, len(vs)) for (k, _, e), vs in ref.items())
