"""DataStream operations run as real jobs on the shared MiniCluster (local-process TaskManagers).

Every job runs with parallelism 2 or 3, so records cross TaskManager processes, and its output is
compared with an independent plain-Python reference. Outputs of parallel subtasks arrive in no
fixed order: results are compared as multisets (Counter) or sorted lists.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import pytest

from runtime.api.common import Row, Types, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import (
    CoFlatMapFunction,
    CoMapFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    ListStateDescriptor,
    MapFunction,
    MapStateDescriptor,
    ReduceFunction,
    ValueStateDescriptor,
)
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.integration.api._data import (
    COL_N,
    RECORDS,
    N,
    col_batch,
    env_p,
    rec,
    records_source,
    source_subtask_of,
)

# -- map / flat_map / filter ------------------------------------------------------------------------


def test_map_flat_map_filter_with_lambdas(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env)
        .map(lambda r: (r[0], r[1] * 3))
        .filter(lambda r: r[1] % 2 == 0)
        .flat_map(lambda r: [r] * (r[1] % 5))
        .execute_and_collect()
    )
    expected = []
    for k, v, _ in RECORDS:
        m = (k, v * 3)
        if m[1] % 2 == 0:
            expected.extend([m] * (m[1] % 5))
    assert Counter(got) == Counter(expected)
    assert len(expected) > N // 3  # the reference is not trivially empty


class Scale(MapFunction):
    def __init__(self, factor: int) -> None:
        self.factor = factor
        self.subtask = -1

    def open(self, runtime_context) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.parallel = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value):
        return (value[0], value[1] * self.factor, self.subtask, self.parallel)


class KeepOddValue(FilterFunction):
    def filter(self, value) -> bool:
        return value[1] % 2 == 1


class Explode(FlatMapFunction):
    def flat_map(self, value):
        for j in range(value[1] % 4):
            yield (value[0], value[1], j, value[2])


def test_map_flat_map_filter_with_function_classes_run_on_every_subtask(cluster_env: MiniCluster) -> None:
    env = env_p(3)
    got = list(
        records_source(env, batch_size=50)
        .map(Scale(5))
        .filter(KeepOddValue())
        .flat_map(Explode())
        .execute_and_collect()
    )
    expected = [(k, v * 5, j) for k, v, _ in RECORDS if (v * 5) % 2 == 1 for j in range((v * 5) % 4)]
    assert Counter((k, v, j) for k, v, j, _ in got) == Counter(expected)
    # the rich function was opened on each of the 3 subtasks and saw the parallelism
    assert {s for *_, s in got} == {0, 1, 2}


def test_rich_map_sees_parallelism_and_subtask_of_its_records(cluster_env: MiniCluster) -> None:
    env = env_p(3)
    got = list(records_source(env, batch_size=50).map(Scale(1)).execute_and_collect())
    assert len(got) == N
    assert {p for *_, p in got} == {3}
    # chained after the source: record i is mapped on the subtask that generated it
    by_value_subtask = Counter((k, v, s) for k, v, s, _ in got)
    expected = Counter((r[0], r[1], source_subtask_of(i, 50, 3)) for i, r in enumerate(RECORDS))
    assert by_value_subtask == expected


# -- union --------------------------------------------------------------------------------------------


def test_union_of_streams_with_different_parallelism(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    a = records_source(env).map(lambda r: ("a", r[1]))  # parallelism 2
    b = env.from_collection([("b", i) for i in range(300)])  # parallelism 1
    c = records_source(env, count=500).map(lambda r: ("c", r[1] + 1000)).set_parallelism(3)
    got = a.union(b, c).map(lambda t: (t[0], t[1] * 2)).execute_and_collect()
    expected = (
        [("a", r[1] * 2) for r in RECORDS]
        + [("b", i * 2) for i in range(300)]
        + [("c", (rec(i)[1] + 1000) * 2) for i in range(500)]
    )
    assert Counter(got) == Counter(expected)


def test_union_with_itself_duplicates_records(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    s = records_source(env, count=400).map(lambda r: r[1])
    got = s.union(s).execute_and_collect()
    assert Counter(got) == Counter([rec(i)[1] for i in range(400)] * 2)


# -- key_by + reduce / running aggregations ---------------------------------------------------------


class SumValues(ReduceFunction):
    def reduce(self, a, b):
        return (a[0], a[1] + b[1], a[2] + b[2])


def test_keyed_reduce_running_counts_from_parallel_source(cluster_env: MiniCluster) -> None:
    """Per key, a running reduce emits one result per element; with a parallel source the order
    within a key varies, so check order-free facts: running counts 1..n, final sums per key."""
    env = env_p(2)
    got = list(
        records_source(env)
        .map(lambda r: (r[0], 1, r[1]))
        .key_by(lambda t: t[0])
        .reduce(SumValues())
        .execute_and_collect()
    )
    counts = Counter(k for k, _, _ in RECORDS)
    sums: dict[str, int] = defaultdict(int)
    for k, v, _ in RECORDS:
        sums[k] += v
    assert Counter((k, n) for k, n, _ in got) == Counter((k, n) for k, c in counts.items() for n in range(1, c + 1))
    final = {}
    for k, n, s in got:
        if n == counts[k]:
            final[k] = s
    assert final == dict(sums)


def _running(records, key, step):
    """Flink's streaming keyed reduce: one output per input, state per key."""
    state: dict = {}
    out = []
    for r in records:
        k = key(r)
        state[k] = r if k not in state else step(state[k], r)
        out.append(state[k])
    return out


def test_keyed_reduce_lambda_exact_running_results(cluster_env: MiniCluster) -> None:
    """A non-parallel source keeps each key's order (one channel per key), so the running results
    are exactly the reference's; the reduce runs on 3 subtasks."""
    env = env_p(3)
    data = RECORDS[:1000]
    got = (
        env.from_collection(data)
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
        .execute_and_collect()
    )
    expected = _running(data, lambda r: r[0], lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
    assert Counter(got) == Counter(expected)


AGG_DATA = [(f"k{i % 5}", (i * 13) % 29, (i * 7) % 31, i) for i in range(600)]


def _set(t, pos, v):
    t = list(t)
    t[pos] = v
    return tuple(t)


@pytest.mark.parametrize(
    "op, pos, step",
    [
        ("sum", 1, lambda a, b: _set(a, 1, a[1] + b[1])),
        ("min", 2, lambda a, b: _set(a, 2, b[2]) if b[2] < a[2] else a),
        ("max", 1, lambda a, b: _set(a, 1, b[1]) if b[1] > a[1] else a),
        ("min_by", 2, lambda a, b: b if b[2] < a[2] else a),
        ("max_by", 1, lambda a, b: b if b[1] > a[1] else a),
    ],
)
def test_keyed_aggregation_by_position(cluster_env: MiniCluster, op, pos, step) -> None:
    env = env_p(2)
    t = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()])
    keyed = env.from_collection(AGG_DATA, t).key_by(lambda r: r[0])
    got = getattr(keyed, op)(pos).execute_and_collect()
    expected = _running(AGG_DATA, lambda r: r[0], step)
    assert Counter(got) == Counter(expected)


ROW_T = Types.ROW_NAMED(["k", "v", "w"], [Types.STRING(), Types.LONG(), Types.LONG()])
ROW_DATA = [Row(k=f"k{i % 4}", v=(i * 11) % 37, w=(i * 5) % 17) for i in range(600)]


def _row_set(r: Row, field: str, value) -> Row:
    d = r.as_dict()
    d[field] = value
    return Row(**d)


@pytest.mark.parametrize(
    "op, field, step",
    [
        ("sum", "v", lambda a, b: _row_set(a, "v", a.v + b.v)),
        ("min", "w", lambda a, b: _row_set(a, "w", b.w) if b.w < a.w else a),
        ("max", "v", lambda a, b: _row_set(a, "v", b.v) if b.v > a.v else a),
        ("max_by", "w", lambda a, b: b if b.w > a.w else a),
    ],
)
def test_keyed_aggregation_by_field_name_on_rows(cluster_env: MiniCluster, op, field, step) -> None:
    env = env_p(2)
    keyed = env.from_collection(ROW_DATA, ROW_T).key_by("k")
    got = list(getattr(keyed, op)(field).execute_and_collect())
    assert all(isinstance(r, Row) and r.field_names == ("k", "v", "w") for r in got)
    expected = _running(ROW_DATA, lambda r: r.k, step)

    def as_tuples(rows: list[Row]) -> Counter[tuple[Any, Any, Any]]:
        return Counter((r.k, r.v, r.w) for r in rows)

    assert as_tuples(got) == as_tuples(expected)


# -- keyed state ----------------------------------------------------------------------------------------


class CountPerKey(MapFunction):
    def open(self, runtime_context) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def map(self, value):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return (value[0], n)


@pytest.mark.parametrize("parallelism, max_parallelism", [(2, 128), (3, 4), (3, 3)])
def test_keyed_map_with_value_state(cluster_env: MiniCluster, parallelism, max_parallelism) -> None:
    env = env_p(parallelism)
    env.set_max_parallelism(max_parallelism)
    got = records_source(env).key_by(lambda r: r[0]).map(CountPerKey()).execute_and_collect()
    counts = Counter(r[0] for r in RECORDS)
    assert Counter(got) == Counter((k, n) for k, c in counts.items() for n in range(1, c + 1))


class BucketStats(KeyedProcessFunction):
    """Per key and 1 s bucket of event time: count and sum (ListState of pending records), count
    (MapState bucket -> count), emitted by an event-time timer at the bucket's end; ValueState
    numbers the buckets of a key in firing order."""

    def open(self, runtime_context) -> None:
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending", Types.PICKLED_BYTE_ARRAY()))
        self.per_bucket = runtime_context.get_map_state(MapStateDescriptor("per-bucket", Types.LONG(), Types.LONG()))
        self.fired = runtime_context.get_state(ValueStateDescriptor("fired", Types.LONG()))

    def process_element(self, value, ctx):
        ts = ctx.timestamp()
        assert ts == value[2]
        bucket = ts // 1000
        self.pending.add((ts, value[1]))
        self.per_bucket.put(bucket, (self.per_bucket.get(bucket) or 0) + 1)
        ctx.timer_service().register_event_time_timer(bucket * 1000 + 999)
        return None

    def on_timer(self, timestamp, ctx):
        bucket = timestamp // 1000
        items = list(self.pending.get())
        due = [v for t, v in items if t <= timestamp]
        self.pending.update([(t, v) for t, v in items if t > timestamp])
        n_map = self.per_bucket.get(bucket)
        self.per_bucket.remove(bucket)
        fired = (self.fired.value() or 0) + 1
        self.fired.update(fired)
        yield (ctx.get_current_key(), timestamp, ctx.timestamp(), len(due), sum(due), n_map, fired, self.per_bucket.contains(bucket))


def test_keyed_process_function_with_value_list_map_state_and_event_time_timers(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = list(
        records_source(env, event_time=True).key_by(lambda r: r[0]).process(BucketStats()).execute_and_collect()
    )
    buckets: dict[tuple[str, int], list[int]] = defaultdict(list)
    for k, v, t in RECORDS:
        buckets[(k, t // 1000)].append(v)
    expected = []
    for k in sorted({k for k, _ in buckets}):
        for rank, b in enumerate(sorted(b for kk, b in buckets if kk == k), start=1):
            vals = buckets[(k, b)]
            end = b * 1000 + 999
            expected.append((k, end, end, len(vals), sum(vals), len(vals), rank, False))
    assert sorted(got) == sorted(expected)


# -- connect ----------------------------------------------------------------------------------------------


class Tag(CoMapFunction):
    def map1(self, value):
        return ("L", value[0], value[1])

    def map2(self, value):
        return ("R", value, -value)


class Split(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from (("L", value[0], j) for j in range(value[1] % 3))

    def flat_map2(self, value):
        if value % 2 == 0:
            yield ("R", "even", value)


def test_connect_with_co_map_and_co_flat_map(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    left = records_source(env)
    right = env.from_collection(list(range(500))).rebalance().map(lambda x: x)  # parallelism 2
    got_map = left.connect(right).map(Tag()).execute_and_collect()
    expected_map = [("L", k, v) for k, v, _ in RECORDS] + [("R", x, -x) for x in range(500)]
    assert Counter(got_map) == Counter(expected_map)

    env = env_p(2)
    left = records_source(env)
    right = env.from_collection(list(range(500)))
    got_flat = left.connect(right).flat_map(Split()).execute_and_collect()
    expected_flat = [("L", k, j) for k, v, _ in RECORDS for j in range(v % 3)] + [("R", "even", x) for x in range(0, 500, 2)]
    assert Counter(got_flat) == Counter(expected_flat)


class SymmetricJoin(KeyedCoProcessFunction):
    """A symmetric hash join in keyed state: each side buffers its records (ListState) and joins
    them with the other side's buffer, so every matching pair is emitted exactly once whatever the
    arrival order. MapState counts records per side."""

    def open(self, runtime_context) -> None:
        self.left = runtime_context.get_list_state(ListStateDescriptor("left", Types.PICKLED_BYTE_ARRAY()))
        self.right = runtime_context.get_list_state(ListStateDescriptor("right", Types.PICKLED_BYTE_ARRAY()))
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen", Types.STRING(), Types.LONG()))

    def _count(self, side: str) -> int:
        n = (self.seen.get(side) or 0) + 1
        self.seen.put(side, n)
        return n

    def process_element1(self, value, ctx):
        key = ctx.get_current_key()
        assert key == value[0]
        self._count("L")
        self.left.add(value)
        for r in self.right.get():
            yield (key, value[1], r[1])

    def process_element2(self, value, ctx):
        key = ctx.get_current_key()
        assert key == value[0]
        self._count("R")
        self.right.add(value)
        for lft in self.left.get():
            yield (key, lft[1], value[1])


def test_keyed_connect_with_keyed_co_process_function(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    left_data = [(f"k{i % 11}", i) for i in range(300)]
    right_data = [(f"k{i % 13}", 1000 + i) for i in range(200)]
    left = env.from_collection(left_data).rebalance().map(lambda x: x)
    right = DataGeneratorSource(lambda i: (f"k{i % 13}", 1000 + i), 200, batch_size=20)
    right_ds = env.from_source(right, WatermarkStrategy.no_watermarks(), "right")
    got = (
        left.connect(right_ds)
        .key_by(lambda a: a[0], lambda b: b[0])
        .process(SymmetricJoin())
        .execute_and_collect()
    )
    expected = [(kl, vl, vr) for kl, vl in left_data for kr, vr in right_data if kl == kr]
    assert Counter(got) == Counter(expected)
    assert len(expected) > 1000


class RunningCountsBothSides(CoMapFunction):
    """connect().key_by().map: keyed state is available in a CoMapFunction."""

    def open(self, runtime_context) -> None:
        self.n = runtime_context.get_state(ValueStateDescriptor("n", Types.LONG()))

    def _next(self) -> int:
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        return n

    def map1(self, value):
        return (value[0], self._next())

    def map2(self, value):
        return (value[0], self._next())


def test_keyed_connect_co_map_shares_keyed_state_between_inputs(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    a = records_source(env, count=700)
    b = env.from_collection([(f"k{i % 7}", i) for i in range(300)])
    got = a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).map(RunningCountsBothSides()).execute_and_collect()
    counts = Counter([rec(i)[0] for i in range(700)] + [f"k{i % 7}" for i in range(300)])
    assert Counter(got) == Counter((k, n) for k, c in counts.items() for n in range(1, c + 1))


# -- partitioning ---------------------------------------------------------------------------------------


class WhereAmI(MapFunction):
    def open(self, runtime_context) -> None:
        self.subtask = runtime_context.get_index_of_this_subtask()

    def map(self, value):
        return (value, self.subtask)


def test_rebalance_spreads_round_robin_over_all_subtasks(cluster_env: MiniCluster) -> None:
    env = env_p(3)
    got = list(env.from_collection(list(range(900))).rebalance().map(WhereAmI()).execute_and_collect())
    assert sorted(v for v, _ in got) == list(range(900))
    per_subtask = Counter(s for _, s in got)
    assert set(per_subtask) == {0, 1, 2}
    assert all(299 <= n <= 301 for n in per_subtask.values()), per_subtask


def test_rescale_sends_each_producer_to_its_own_consumers(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    src = DataGeneratorSource(lambda i: i, 1200, batch_size=100)
    ds = env.from_source(src, WatermarkStrategy.no_watermarks(), "ints")  # parallelism 2
    got = list(ds.rescale().map(WhereAmI()).set_parallelism(4).execute_and_collect())
    assert sorted(v for v, _ in got) == list(range(1200))
    producers_of = defaultdict(set)
    for v, s in got:
        producers_of[s].add(source_subtask_of(v, 100, 2))
    # pointwise: 2 producers -> 4 consumers, each consumer reads exactly one producer
    assert set(producers_of) == {0, 1, 2, 3}
    assert all(len(p) == 1 for p in producers_of.values()), producers_of
    assert sorted(min(p) for p in producers_of.values()) == [0, 0, 1, 1]


def test_shuffle_delivers_every_record_once(cluster_env: MiniCluster) -> None:
    env = env_p(3)
    got = list(records_source(env, batch_size=100).shuffle().map(WhereAmI()).execute_and_collect())
    assert Counter(v for v, _ in got) == Counter(RECORDS)
    assert set(s for _, s in got) == {0, 1, 2}


def test_broadcast_gives_every_subtask_every_record(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = list(records_source(env, count=500).broadcast().map(WhereAmI()).set_parallelism(3).execute_and_collect())
    assert len(got) == 3 * 500
    assert Counter(got) == Counter((rec(i), s) for i in range(500) for s in range(3))


def test_forward_keeps_records_on_their_subtask(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    src = DataGeneratorSource(lambda i: i, 1000, batch_size=50)
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "ints").forward().map(WhereAmI()).execute_and_collect()
    )
    assert sorted(v for v, _ in got) == list(range(1000))
    assert all(s == source_subtask_of(v, 50, 2) for v, s in got)


# -- map_batches --------------------------------------------------------------------------------------------


def add_columns_numpy(cols):
    return {"k": cols["k"], "v2": cols["v"] * 2 + 1, "ts": cols["ts"]}


def filter_arrow(batch):
    import pyarrow.compute as pc

    mask = pc.equal(pc.bit_wise_and(batch.column("v2"), 1), 1)  # all odd: keeps all
    t = batch.filter(pc.and_(mask, pc.greater(batch.column("k"), 1)))
    return t.append_column("vk", pc.add(t.column("v2"), t.column("k")))


def test_map_batches_numpy_then_pyarrow(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    src = DataGeneratorSource(None, COL_N, batch_generator=col_batch, batch_size=256)
    got = (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "columns")
        .map_batches(add_columns_numpy, batch_format="numpy")
        .map_batches(filter_arrow, batch_format="pyarrow")
        .execute_and_collect()
    )
    rows = [(r["k"], r["v2"], r["ts"], r["vk"]) for r in got]
    expected = []
    for i in range(COL_N):
        k, v, ts = i % 5, (i * 7) % 23, i * 3
        v2 = v * 2 + 1
        if k > 1:
            expected.append((k, v2, ts, v2 + k))
    assert Counter(rows) == Counter(expected)


def test_map_batches_over_named_rows(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = (
        records_source(env)
        .map(lambda r: Row(k=r[0], v=r[1]))
        .map_batches(lambda c: {"k": c["k"], "sq": c["v"] * c["v"]})
        .execute_and_collect()
    )
    assert Counter((r.k, r.sq) for r in got) == Counter((k, v * v) for k, v, _ in RECORDS)


# -- sinks ---------------------------------------------------------------------------------------------------


def test_print_job_finishes_with_all_subtasks(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    ds = records_source(env, count=200).map(lambda r: r[1]).rebalance().map(lambda x: x).set_parallelism(3)
    ds.print("ints")  # a sink takes the default parallelism (2), as in Flink
    ds.print().set_parallelism(3)  # chained to the map
    result = env.execute("print job")
    assert result.status is JobStatus.FINISHED
    m = result.metrics
    (separate,) = [name for name in m if name.startswith("Print to Std. Out")]
    (chained,) = [name for name in m if name.endswith("-> Print to Std. Out")]
    assert m[separate]["parallelism"] == 2 and m[separate]["records_in"] == 200
    assert m[chained]["parallelism"] == 3 and m[chained]["records_in"] == 200


def delta_row(i: int) -> Row:
    k, v, t = rec(i)
    return Row(id=i, k=k, v=v, ts=t)


def test_delta_sink_contents_equal_the_reference(cluster_env: MiniCluster, tmp_path) -> None:
    deltalake = pytest.importorskip("deltalake")
    from runtime.api.datastream import DeltaSink

    path = str(tmp_path / "table")
    env = env_p(2)
    src = DataGeneratorSource(delta_row, N, batch_size=128)
    ds = env.from_source(src, WatermarkStrategy.no_watermarks(), "rows")
    ds.filter(lambda r: r.v % 3 != 0).sink_to(DeltaSink.for_path(path))
    result = env.execute("delta job")
    assert result.status is JobStatus.FINISHED
    table = deltalake.DeltaTable(path)
    rows = sorted(tuple(d.values()) for d in table.to_pyarrow_table().select(["id", "k", "v", "ts"]).to_pylist())
    expected = sorted((i, *rec(i)) for i in range(N) if rec(i)[1] % 3 != 0)
    assert rows == expected
    assert table.version() == 0
    assert result.get_accumulator_result("delta_records") == len(expected)


# -- chaining and slot sharing -----------------------------------------------------------------------------------


def _chain_job(env, variant: str):
    if variant == "env_no_chaining":
        env.disable_operator_chaining()
    ds = records_source(env).map(lambda r: (r[0], r[1] + 1))
    if variant == "disable_chaining":
        ds = ds.disable_chaining()
    elif variant == "slot_sharing_group":
        ds = ds.slot_sharing_group("other")
    f = ds.filter(lambda r: r[1] % 2 == 0)
    if variant == "start_new_chain":
        f = f.start_new_chain()
    return f.map(lambda r: (r[0], r[1] * 10))


@pytest.mark.parametrize(
    "variant, vertices",
    [("default", 1), ("disable_chaining", 3), ("start_new_chain", 2), ("slot_sharing_group", 2), ("env_no_chaining", 5)],
)
def test_chaining_and_slot_sharing_change_the_job_graph_not_the_result(cluster_env: MiniCluster, variant, vertices) -> None:
    env = env_p(2)
    _chain_job(env, variant).print()
    jg = env.get_job_graph("graph only")
    assert len(jg.vertices) == vertices, [v.operator_names for v in jg.vertices]
    if variant == "slot_sharing_group":
        assert {v.slot_sharing_group for v in jg.vertices} == {"default", "other"}

    env = env_p(2)
    got = _chain_job(env, variant).execute_and_collect()
    expected = [(k, (v + 1) * 10) for k, v, _ in RECORDS if (v + 1) % 2 == 0]
    assert Counter(got) == Counter(expected)


# -- execute_and_collect with limit ------------------------------------------------------------------------------


def test_execute_and_collect_with_limit_cancels_an_endless_job(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    src = DataGeneratorSource(rec, 100_000_000, batch_size=50)
    got = env.from_source(src, WatermarkStrategy.no_watermarks(), "endless").map(lambda r: r[1]).execute_and_collect(limit=25)
    assert isinstance(got, list) and len(got) == 25
    assert set(got) <= {rec(i)[1] for i in range(101)}
    # the cluster is free again: a bounded job runs right after
    env = env_p(2)
    assert sorted(records_source(env, count=100).map(lambda r: r[1]).execute_and_collect(limit=1000)) == sorted(
        rec(i)[1] for i in range(100)
    )


# -- more combinations -------------------------------------------------------------------------------------------


def test_rescale_from_more_producers_to_fewer_consumers(cluster_env: MiniCluster) -> None:
    env = env_p(3)
    src = DataGeneratorSource(lambda i: i, 900, batch_size=50)
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "ints").rescale().map(WhereAmI()).set_parallelism(2).execute_and_collect()
    )
    assert sorted(v for v, _ in got) == list(range(900))
    consumers_of = defaultdict(set)
    for v, s in got:
        consumers_of[source_subtask_of(v, 50, 3)].add(s)
    # pointwise: 3 producers -> 2 consumers, each producer feeds exactly one consumer, both are used
    assert set(consumers_of) == {0, 1, 2}
    assert all(len(c) == 1 for c in consumers_of.values()), consumers_of
    assert set().union(*consumers_of.values()) == {0, 1}


class FirstSeen(FilterFunction):
    """Keyed filter with MapState: keep the first record of each (key, value)."""

    def open(self, runtime_context) -> None:
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen", Types.LONG(), Types.BOOLEAN()))

    def filter(self, value) -> bool:
        if self.seen.contains(value[1]):
            return False
        self.seen.put(value[1], True)
        return True


class Pairs(FlatMapFunction):
    """Keyed flat_map with ListState: pair each value with the previous one of the key (order-free
    check: n-1 pairs per key with the key's values)."""

    def open(self, runtime_context) -> None:
        self.prev = runtime_context.get_list_state(ListStateDescriptor("prev", Types.LONG()))

    def flat_map(self, value):
        old = list(self.prev.get())
        self.prev.update([value[1]])
        if old:
            yield (value[0], old[0], value[1])


def test_keyed_filter_and_flat_map_with_state(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    firsts = list(records_source(env).key_by(lambda r: r[0]).filter(FirstSeen()).execute_and_collect())
    assert len(firsts) == len(set(firsts_key := [(k, v) for k, v, _ in firsts]))
    assert set(firsts_key) == {(k, v) for k, v, _ in RECORDS}

    env = env_p(3)
    pairs = list(records_source(env).key_by(lambda r: r[0]).flat_map(Pairs()).execute_and_collect())
    counts = Counter(k for k, _, _ in RECORDS)
    assert Counter(k for k, _, _ in pairs) == Counter({k: c - 1 for k, c in counts.items()})
    values = defaultdict(Counter)
    for k, v, _ in RECORDS:
        values[k][v] += 1
    for k in counts:
        # every value but one (the key's first) is the second element of a pair exactly once
        seconds = Counter(b for kk, _, b in pairs if kk == k)
        assert sum((values[k] - seconds).values()) == 1 and not (seconds - values[k])


def test_connect_with_broadcast_stream_reaches_every_subtask(cluster_env: MiniCluster) -> None:
    class Mark(CoMapFunction):
        def open(self, runtime_context) -> None:
            self.subtask = runtime_context.get_index_of_this_subtask()

        def map1(self, value):
            return ("data", value, -1)

        def map2(self, value):
            return ("rule", value, self.subtask)

    env = env_p(3)
    data = records_source(env, count=300).map(lambda r: r[1])
    rules = env.from_collection(["r1", "r2", "r3", "r4"]).broadcast()
    got = list(data.connect(rules).map(Mark()).execute_and_collect())
    assert Counter(v for kind, v, _ in got if kind == "data") == Counter(rec(i)[1] for i in range(300))
    assert Counter((v, s) for kind, v, s in got if kind == "rule") == Counter((r, s) for r in ["r1", "r2", "r3", "r4"] for s in range(3))


def test_count_window_all(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    got = list(env.from_collection(list(range(103))).count_window_all(10).reduce(lambda a, b: a + b).execute_and_collect())
    # (the non-parallel window's output is spread over the 2 collect subtasks: order is lost)
    assert sorted(got) == [sum(range(i, i + 10)) for i in range(0, 100, 10)]


def test_second_execute_runs_only_new_sinks(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    first = records_source(env, count=100).map(lambda r: r[1])
    assert sorted(first.execute_and_collect()) == sorted(rec(i)[1] for i in range(100))
    second = records_source(env, count=50).map(lambda r: -r[1])
    result = second.execute_and_collect()
    assert sorted(result) == sorted(-rec(i)[1] for i in range(50))


def partitioned_row(i: int) -> Row:
    return Row(id=i, part=f"p{i % 3}", v=float(i) / 4)


def test_delta_sink_partitioned_with_three_writers_plus_a_second_sink(cluster_env: MiniCluster, tmp_path) -> None:
    deltalake = pytest.importorskip("deltalake")
    from runtime.api.datastream import DeltaSink

    path = str(tmp_path / "partitioned")
    env = env_p(3)
    src = DataGeneratorSource(partitioned_row, 1500, batch_size=100)
    ds = env.from_source(src, WatermarkStrategy.no_watermarks(), "rows")
    ds.sink_to(DeltaSink(path, partition_by=["part"])).name("delta")
    ds.print("second sink").set_parallelism(1)
    result = env.execute("delta partitioned")
    assert result.status is JobStatus.FINISHED
    table = deltalake.DeltaTable(path)
    assert table.metadata().partition_columns == ["part"]
    rows = sorted((d["id"], d["part"], d["v"]) for d in table.to_pyarrow_table().to_pylist())
    assert rows == sorted((i, f"p{i % 3}", i / 4) for i in range(1500))
    assert result.metrics["Print to Std. Out"]["records_in"] == 1500

    # append a second version from another job
    env = env_p(2)
    src = DataGeneratorSource(partitioned_row, 10, batch_size=5)
    more = env.from_source(src, WatermarkStrategy.no_watermarks(), "more")
    more.map(lambda r: Row(id=r.id + 10_000, part=r.part, v=r.v)).sink_to(DeltaSink(path, partition_by="part"))
    env.execute("delta append")
    table = deltalake.DeltaTable(path)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table()["id"].to_pylist()) == sorted(list(range(1500)) + [10_000 + i for i in range(10)])


def test_running_aggregations_on_plain_numbers(cluster_env: MiniCluster) -> None:
    """PyFlink: a plain number aggregates itself (sum()/max() with the default position 0)."""
    data = [(i * 17) % 41 for i in range(500)]
    env = env_p(2)
    got_sum = list(env.from_collection(data).key_by(lambda x: x % 3).sum().execute_and_collect())
    env = env_p(3)
    got_max = list(env.from_collection(data).key_by(lambda x: x % 3).max().execute_and_collect())
    assert Counter(got_sum) == Counter(_running(data, lambda x: x % 3, lambda a, b: a + b))
    assert Counter(got_max) == Counter(_running(data, lambda x: x % 3, lambda a, b: max(a, b)))


def test_columnar_filter_then_keyed_reduce_by_field_name(cluster_env: MiniCluster) -> None:
    env = env_p(2)
    src = DataGeneratorSource(None, COL_N, batch_generator=col_batch, batch_size=256)
    got = list(
        env.from_source(src, WatermarkStrategy.no_watermarks(), "columns")
        .filter(lambda r: r["v"] % 2 == 0)
        .key_by("k")
        .sum("v")
        .set_parallelism(3)
        .execute_and_collect()
    )
    kept = [(i % 5, (i * 7) % 23) for i in range(COL_N) if ((i * 7) % 23) % 2 == 0]
    counts = Counter(k for k, _ in kept)
    assert Counter(r["k"] for r in got) == counts
    finals = {}
    for r in got:
        finals[r["k"]] = max(finals.get(r["k"], 0), r["v"])
    sums: dict[int, int] = defaultdict(int)
    for k, v in kept:
        sums[k] += v
    assert finals == dict(sums)


def test_two_delta_sinks_in_one_job_both_commit_and_are_reported_per_operator(cluster_env: MiniCluster, tmp_path) -> None:
    deltalake = pytest.importorskip("deltalake")
    from runtime.api.datastream import DeltaSink

    shared, other = str(tmp_path / "shared"), str(tmp_path / "other")
    env = env_p(2)
    ds = env.from_collection(list(range(100)))
    ds.filter(lambda x: x % 2 == 0).map(lambda x: Row(x=x)).sink_to(DeltaSink(shared)).name("evens")
    ds.filter(lambda x: x % 2 == 1).map(lambda x: Row(x=x)).sink_to(DeltaSink(shared)).name("odds")
    ds.map(lambda x: Row(y=x * 10)).sink_to(DeltaSink(other)).name("tens")
    result = env.execute("three sinks")
    assert sorted(deltalake.DeltaTable(shared).to_pyarrow_table()["x"].to_pylist()) == list(range(100))
    assert sorted(deltalake.DeltaTable(other).to_pyarrow_table()["y"].to_pylist()) == [x * 10 for x in range(100)]
    per_op = result.accumulators["operators"]
    assert {per_op[n]["delta_records"] for n in ("evens", "odds")} == {50} and per_op["tens"]["delta_records"] == 100
