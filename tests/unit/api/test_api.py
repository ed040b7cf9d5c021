from __future__ import annotations

import pytest

from runtime.api.common import Configuration, Duration, Row, TimestampAssigner, Types, WatermarkStrategy
from runtime.api.datastream import (
    CoMapFunction,
    KeyedProcessFunction,
    MapFunction,
    ProcessFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
)
from runtime.api.execution import use_executor
from runtime.core.errors import InvalidProgramError
from runtime.graph.transformations import ChainingStrategy, PartitionerKind
from tests.unit.api.local_runner import LocalExecutor

pytestmark = pytest.mark.unit


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()


def test_environment_settings_and_config():
    e = StreamExecutionEnvironment.get_execution_environment(Configuration().set_integer("parallelism.default", 3))
    assert e.get_parallelism() == 3 and e.get_max_parallelism() == 128
    e.set_parallelism(2).set_max_parallelism(64).set_runtime_mode(RuntimeExecutionMode.BATCH)
    assert (e.get_parallelism(), e.get_max_parallelism(), e.get_runtime_mode()) == (2, 64, RuntimeExecutionMode.BATCH)
    e.disable_operator_chaining()
    assert not e.is_chaining_enabled()
    assert e._job_config()["pipeline.operator-chaining"] == "false"
    c = Configuration()
    c.set_string("a", "x").set_boolean("b", True)
    assert c.get_string("a") == "x" and c.get_boolean("b") is True and c.get_integer("zz", 5) == 5
    assert c.to_dict() == {"a": "x", "b": "true"}


class M(MapFunction):
    def map(self, value):
        return value


@pytest.mark.parametrize(
    "build,msg",
    [
        (lambda ds: ds.map(5), "map(): expected a MapFunction or a callable, got int"),
        (lambda ds: ds.flat_map(M()), "flat_map(): expected a FlatMapFunction or a callable, got M"),
        (lambda ds: ds.filter("x"), "filter(): expected a FilterFunction or a callable, got str"),
        (lambda ds: ds.key_by(3), "key_by(): expected a KeySelector, a callable or a field name, got int"),
        (lambda ds: ds.key_by(lambda r: r, key_type=Types.LIST(Types.INT())), "cannot be a key type"),
        (lambda ds: ds.key_by(lambda r: r, key_type=Types.MAP(Types.STRING(), Types.INT())), "cannot be a key type"),
        (lambda ds: ds.key_by(lambda r: r, key_type=Types.LIST(Types.INT())), "cannot be a key type"),
        (lambda ds: ds.key_by("nope"), "field 'nope' is not in"),
        (lambda ds: ds.key_by("tags"), "cannot be a key"),
        (lambda ds: ds.key_by("id").sum("missing"), "sum(): field 'missing'"),
        (lambda ds: ds.key_by("id").max(7), "max(): position 7 is out of range"),
        (lambda ds: ds.key_by("id").process(M()), "KeyedProcessFunction"),
        (lambda ds: ds.process(KP()), "call key_by() first"),
        (lambda ds: ds.key_by("id").rebalance(), "cannot override the partitioning"),
        (lambda ds: ds.rebalance().set_parallelism(2), "virtual transformation"),
        (lambda ds: ds.map(M()).set_parallelism(0), "positive int"),
        (lambda ds: ds.set_parallelism(2), "non-parallel source"),
        (lambda ds: ds.assign_timestamps_and_watermarks(5), "expected a WatermarkStrategy"),
        (lambda ds: ds.connect(ds).map(M()), "expected a CoMapFunction"),
        (lambda ds: ds.map_batches(lambda b: b, batch_format="polars"), "batch_format"),
        (lambda ds: ds.sink_to(print), "expected a Sink"),
    ],
)
def test_validation_errors_name_the_operator(env, build, msg):
    ds = env.from_collection(
        [(1, "a", [1])], Types.ROW_NAMED(["id", "name", "tags"], [Types.INT(), Types.STRING(), Types.LIST(Types.INT())])
    )
    with pytest.raises(InvalidProgramError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        build(ds)


class KP(KeyedProcessFunction):
    def process_element(self, value, ctx):
        yield value


def test_stream_graph_of_a_pyflink_shaped_program(env):
    env.set_parallelism(4)
    src = env.from_collection([("a", 1), ("b", 2)], Types.TUPLE([Types.STRING(), Types.INT()]))
    keyed = src.map(lambda t: (t[0], t[1] * 2)).name("double").uid("double-uid").key_by(lambda t: t[0])
    out = keyed.process(KP(), output_type=Types.TUPLE([Types.STRING(), Types.INT()])).set_parallelism(2).start_new_chain()
    out.filter(lambda t: True).disable_chaining().print()
    sg = env.get_stream_graph("job")
    by_name = {n.name: n for n in sg.nodes.values()}
    assert by_name["Collection Source"].parallelism == 1 and by_name["Collection Source"].is_source
    assert by_name["double"].uid == "double-uid" and by_name["double"].parallelism == 4
    kp = by_name["KeyedProcess"]
    assert kp.parallelism == 2 and kp.keyed and kp.chaining_strategy is ChainingStrategy.HEAD
    (edge,) = kp.in_edges
    assert edge.partitioner.kind is PartitionerKind.HASH and callable(edge.partitioner.key_selector)
    assert edge.partitioner.explicit
    assert by_name["Filter"].chaining_strategy is ChainingStrategy.NEVER
    assert by_name["Print to Std. Out"].is_sink
    jg = env.get_job_graph("job")
    assert jg.job_name == "job" and len(jg.vertices) >= 3


def test_no_sink_is_an_error(env):
    env.from_collection([1]).map(lambda x: x)
    with pytest.raises(InvalidProgramError, match="has no sink: the output of .Map. goes nowhere"):
        env.get_stream_graph()


def test_execute_and_collect_end_to_end_with_local_executor(env):
    with use_executor(LocalExecutor()) as ex:
        ds = env.from_collection([1, 2, 3, 4, 5])
        result = ds.map(lambda x: x * 10).filter(lambda x: x != 30).flat_map(lambda x: [x, x + 1]).execute_and_collect()
        assert list(result) == [10, 11, 20, 21, 40, 41, 50, 51]
        result.close()
        # limit: a list
        assert env.from_collection(["a", "b", "c"]).execute_and_collect(limit=2) == ["a", "b"]
        # execute() clears transformations: the second job had only its own sink
        assert len(ex.job_graphs) == 2


def test_keyed_running_aggregates_and_reduce(env):
    data = [("a", 1, 5), ("b", 2, 1), ("a", 3, 2), ("a", 2, 9)]
    with use_executor(LocalExecutor()):
        t = Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])
        assert list(env.from_collection(data, t).key_by(lambda r: r[0]).sum(1).execute_and_collect()) == [
            ("a", 1, 5), ("b", 2, 1), ("a", 4, 5), ("a", 6, 5)
        ]
        assert list(env.from_collection(data, t).key_by(lambda r: r[0]).min(2).execute_and_collect()) == [
            ("a", 1, 5), ("b", 2, 1), ("a", 1, 2), ("a", 1, 2)
        ]
        assert list(env.from_collection(data, t).key_by(lambda r: r[0]).max_by(1).execute_and_collect()) == [
            ("a", 1, 5), ("b", 2, 1), ("a", 3, 2), ("a", 3, 2)
        ]
        rows = [Row(k="x", v=1), Row(k="x", v=2)]
        assert [r.v for r in env.from_collection(rows).key_by("k").reduce(lambda a, b: Row(k=a.k, v=a.v + b.v)).execute_and_collect()] == [1, 3]


def test_keyed_map_has_keyed_state(env):
    from runtime.api.datastream import ValueStateDescriptor

    class Counter(MapFunction):
        def open(self, runtime_context):
            self.count = runtime_context.get_state(ValueStateDescriptor("n", Types.INT()))

        def map(self, value):
            n = (self.count.value() or 0) + 1
            self.count.update(n)
            return (value, n)

    with use_executor(LocalExecutor()):
        got = list(env.from_collection(["a", "b", "a"]).key_by(lambda x: x).map(Counter()).execute_and_collect())
    assert got == [("a", 1), ("b", 1), ("a", 2)]


def test_event_time_tumbling_window_reduce(env):
    from runtime.api.common import Time
    from runtime.api.datastream import TumblingEventTimeWindows

    class Ts(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[1]

    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(Ts())
    data = [("a", 1), ("a", 5), ("b", 7), ("a", 12)]
    with use_executor(LocalExecutor()):
        got = (
            env.from_collection(data)
            .assign_timestamps_and_watermarks(strategy)
            .key_by(lambda t: t[0])
            .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
            .reduce(lambda x, y: (x[0], x[1] + y[1]))
            .execute_and_collect()
        )
        assert sorted(got) == [("a", 6), ("a", 12), ("b", 7)]


def test_connected_streams_and_union(env):
    class CM(CoMapFunction):
        def map1(self, value):
            return f"L{value}"

        def map2(self, value):
            return f"R{value}"

    with use_executor(LocalExecutor()):
        a = env.from_collection([1, 2])
        b = env.from_collection([3])
        assert sorted(a.connect(b).map(CM()).execute_and_collect()) == ["L1", "L2", "R3"]
        assert sorted(env.from_collection([1]).union(env.from_collection([2]), env.from_collection([3])).execute_and_collect()) == [1, 2, 3]


def test_generator_source_with_field_watermarks_and_map_batches(env):
    from runtime.api.connectors.generator import DataGeneratorSource

    src = DataGeneratorSource(None, 10, batch_generator=lambda i: {"id": i, "ts_ms": i * 100}, batch_size=4)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(TimestampAssigner.from_field("ts_ms"))
    with use_executor(LocalExecutor()):
        ds = env.from_source(src, strategy, "gen").map_batches(lambda c: {"id2": c["id"] * 2})
        assert sorted(r.id2 for r in ds.execute_and_collect()) == [i * 2 for i in range(10)]


def test_from_source_puts_the_watermark_strategy_in_the_source_and_mirrors_parallelism(env):
    from runtime.api.connectors.generator import DataGeneratorSource

    src = DataGeneratorSource(lambda i: i, 10)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, t: v)
    env.from_source(src, strategy, "gen").set_parallelism(3).uid("g").print()
    sg = env.get_stream_graph()
    by_name = {n.name: n for n in sg.nodes.values()}
    assert by_name["gen"].parallelism == 3 and by_name["gen"].uid == "g"
    # FLIP-27: the source operator itself assigns timestamps and generates watermarks
    assert "gen: Timestamps/Watermarks" not in by_name and by_name["gen"].operator_factory().strategy is strategy


def test_slot_sharing_group_and_window_all_parallelism(env):
    from runtime.api.datastream import SlotSharingGroup, TumblingEventTimeWindows

    ssg = SlotSharingGroup.builder("heavy").set_cpu_cores(1.0).set_task_heap_memory_mb(100).build()
    ds = env.from_collection([1]).map(lambda x: x).slot_sharing_group(ssg)
    ds.window_all(TumblingEventTimeWindows.of(10)).reduce(lambda a, b: a + b).print()
    env.set_parallelism(4)
    sg = env.get_stream_graph()
    by_name = {n.name: n for n in sg.nodes.values()}
    assert by_name["Map"].slot_sharing_group == "heavy" and by_name["Map"].resources.cpu_cores == 1.0
    (w,) = [n for n in sg.nodes.values() if n.name.startswith("Window(")]
    assert w.parallelism == 1


def test_columnar_aggregate_requires_field_key(env):
    try:
        from runtime.api.datastream.aggregates import Aggregates, Count, Sum
    except ImportError:
        pytest.skip("aggregates module not available yet")
    from runtime.api.datastream import CountTumblingWindowAssigner, TumblingEventTimeWindows

    ds = env.from_collection([Row(k=1, value=2.0)])
    agg = Aggregates.of(count=Count(), sum=Sum("value"))
    with pytest.raises(InvalidProgramError, match="key_by"):
        ds.key_by(lambda r: r.k).window(TumblingEventTimeWindows.of(10)).aggregate(agg)
    with pytest.raises(InvalidProgramError, match="tumbling or sliding"):
        ds.key_by("k").window(CountTumblingWindowAssigner.of(3)).aggregate(agg)
    ds.key_by("k").window(TumblingEventTimeWindows.of(10)).aggregate(agg).print()
    assert any(n.name.startswith("ColumnarWindowAggregate") for n in env.get_stream_graph().nodes.values())


def test_process_function_on_stream(env):
    class P(ProcessFunction):
        def process_element(self, value, ctx):
            yield value + 1

    with use_executor(LocalExecutor()):
        assert list(env.from_collection([1, 2]).process(P()).execute_and_collect()) == [2, 3]


def test_sink_to_delta_end_to_end(env, tmp_path):
    deltalake = pytest.importorskip("deltalake")
    from runtime.api.connectors.delta import DeltaSink

    path = str(tmp_path / "out")
    with use_executor(LocalExecutor()):
        env.from_collection([Row(id=i, v=float(i)) for i in range(5)]).sink_to(DeltaSink(path)).name("delta")
        result = env.execute("delta job")
    assert result.accumulators["delta_version"] == 0
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]


def test_count_window(env):
    with use_executor(LocalExecutor()):
        got = list(env.from_collection([1, 2, 3, 4, 5]).key_by(lambda x: 0).count_window(2).reduce(lambda a, b: a + b).execute_and_collect())
    assert got == [3, 7]


def test_side_outputs_are_tagged_edges_chained_or_across_the_network(env):
    from runtime.api.datastream import OutputTag

    tag = OutputTag("odd")
    main = env.from_collection([1, 2, 3]).process(lambda v, ctx: [v] if v % 2 == 0 else [(tag, v)])
    main.print()
    main.get_side_output(tag).print()  # chained: same parallelism, forward
    main.get_side_output(tag).rebalance().map(lambda v: v).set_parallelism(3).print()  # over the network
    jg = env.get_job_graph("tags")
    outputs = [(o.output_tag) for v in jg.vertices for op in v.operators for o in op.chained_outputs]
    assert outputs.count("odd") == 1 and None in outputs
    assert sorted(str(ds.output_tag) for v in jg.vertices for ds in v.produced_datasets) == ["None", "odd"]
    with pytest.raises(InvalidProgramError, match="get_side_output"):
        env.from_collection([1]).get_side_output(tag).print()
        env.get_job_graph("bad")
    with pytest.raises(InvalidProgramError, match="OutputTag"):
        main.get_side_output("odd")
    with pytest.raises(ValueError, match="non-empty"):
        OutputTag("")


def test_side_outputs_run_through_the_local_executor(env):
    from runtime.api.datastream import OutputTag, ProcessFunction

    tag = OutputTag("odd")

    class Split(ProcessFunction):
        def process_element(self, value, ctx):
            if value % 2:
                yield tag, value
            else:
                ctx.output(tag, -value)
                yield value

    main = env.from_collection(list(range(6))).process(Split())
    with use_executor(LocalExecutor()):
        got = sorted(main.union(main.get_side_output(tag).map(lambda v: ("side", v))).execute_and_collect(), key=repr)
    assert got == sorted([0, 2, 4, ("side", 1), ("side", 3), ("side", 5), ("side", 0), ("side", -2), ("side", -4)], key=repr)
