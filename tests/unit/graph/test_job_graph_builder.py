from __future__ import annotations

import cloudpickle
import pytest

from runtime.graph.job_graph import DistributionPattern, JobGraph, JobType, ResultPartitionType
from runtime.graph.job_graph_builder import build_job_graph
from runtime.graph.stream_graph_generator import generate_stream_graph
from runtime.graph.transformations import ChainingStrategy, ExchangeMode, PartitionerKind, PartitionerSpec, PartitionTransformation
from tests.graph_builders import DummyOperator, key_by, one, partition, sink, source, two, union

pytestmark = pytest.mark.unit


def compile_(roots, p: int = 2, mode: str = "STREAMING", config: dict[str, str] | None = None) -> JobGraph:
    return build_job_graph(generate_stream_graph(roots, "job", p, runtime_mode=mode, config=config), job_id="j1")


def chains(jg: JobGraph) -> list[list[str]]:
    return [v.operator_names for v in jg.topological_vertices()]


def test_forward_same_everything_chains() -> None:
    s = source("Source: events")
    m = one(s, "Map")
    w = one(m, "Timestamps/Watermarks")
    jg = compile_([sink(w, "Sink: out")])
    assert chains(jg) == [["Source: events", "Map", "Timestamps/Watermarks", "Sink: out"]]
    (v,) = jg.vertices
    assert v.name == "Source: events -> Map -> Timestamps/Watermarks -> Sink: out"
    assert v.inputs == [] and v.produced_datasets == []
    assert [o.target_node_id for o in v.operators[0].chained_outputs] == [m.id]
    assert jg.job_id == "j1" and jg.job_type is JobType.STREAMING


@pytest.mark.parametrize("kind", [PartitionerKind.REBALANCE, PartitionerKind.HASH, PartitionerKind.BROADCAST,
                                  PartitionerKind.RESCALE, PartitionerKind.SHUFFLE])
def test_non_forward_partitioner_breaks_chain(kind: PartitionerKind) -> None:
    s = source()
    out = sink(partition(s, kind, "k" if kind is PartitionerKind.HASH else None))
    jg = compile_([out])
    assert chains(jg) == [["Source: events"], ["Sink: out"]]
    (edge,) = jg.vertex(jg.topological_vertices()[1].id).inputs
    assert edge.partitioner is kind
    pointwise = kind is PartitionerKind.RESCALE
    assert edge.distribution_pattern is (DistributionPattern.POINTWISE if pointwise else DistributionPattern.ALL_TO_ALL)


def test_explicit_forward_chains() -> None:
    s = source()
    jg = compile_([sink(partition(s, PartitionerKind.FORWARD))])
    assert chains(jg) == [["Source: events", "Sink: out"]]


def test_parallelism_mismatch_breaks_chain() -> None:
    s = source(parallelism=2)
    jg = compile_([sink(s, parallelism=3)])
    assert chains(jg) == [["Source: events"], ["Sink: out"]]
    assert [v.parallelism for v in jg.topological_vertices()] == [2, 3]


def test_different_slot_sharing_groups_break_chain() -> None:
    s = source()
    jg = compile_([sink(s, slot_sharing_group="other")])
    assert chains(jg) == [["Source: events"], ["Sink: out"]]
    # the negation: the same explicit group chains
    s2 = source(slot_sharing_group="g")
    assert chains(compile_([sink(s2, slot_sharing_group="g")])) == [["Source: events", "Sink: out"]]


@pytest.mark.parametrize(
    "up, down, chained",
    [
        (ChainingStrategy.ALWAYS, ChainingStrategy.ALWAYS, True),
        (ChainingStrategy.HEAD, ChainingStrategy.ALWAYS, True),  # HEAD only refuses its own input
        (ChainingStrategy.NEVER, ChainingStrategy.ALWAYS, False),
        (ChainingStrategy.ALWAYS, ChainingStrategy.HEAD, False),
        (ChainingStrategy.ALWAYS, ChainingStrategy.NEVER, False),
    ],
)
def test_chaining_strategies(up: ChainingStrategy, down: ChainingStrategy, chained: bool) -> None:
    s = source()
    m = one(s, "Up", chaining_strategy=up)
    out = sink(m, "Down", chaining_strategy=down)
    jg = compile_([out])
    expected = [["Source: events", "Up", "Down"]] if chained else [["Source: events", "Up"], ["Down"]]
    if up is ChainingStrategy.HEAD:  # Up starts a new chain but Down joins it
        expected = [["Source: events"], ["Up", "Down"]]
    if up is ChainingStrategy.NEVER:  # NEVER refuses both its input and its output
        expected = [["Source: events"], ["Up"], ["Down"]]
    assert chains(jg) == expected


def test_global_disable() -> None:
    s = source()
    out = sink(one(s))
    assert len(compile_([out], config={"pipeline.operator-chaining": "false"}).vertices) == 3
    assert len(compile_([out], config={"pipeline.operator-chaining": "true"}).vertices) == 1


def test_batch_exchange_breaks_chain() -> None:
    s = source()
    p = PartitionTransformation(name="p", input=s, partitioner=PartitionerSpec(PartitionerKind.FORWARD, explicit=True),
                                exchange_mode=ExchangeMode.BATCH)
    jg = compile_([sink(p)])
    assert chains(jg) == [["Source: events"], ["Sink: out"]]
    assert jg.topological_vertices()[0].produced_datasets[0].result_type is ResultPartitionType.BLOCKING


def test_two_inputs_from_different_chains_not_chained() -> None:
    a, b = source("Source: a"), source("Source: b")
    c = two(a, b, "CoMap")
    jg = compile_([sink(c)])
    assert chains(jg) == [["Source: a"], ["Source: b"], ["CoMap", "Sink: out"]]
    co = jg.topological_vertices()[2]
    assert sorted((e.type_number, e.target_node_id) for e in co.inputs) == [(0, c.id), (1, c.id)]


def test_dag_chain_two_input_fed_by_one_chain() -> None:
    s = source()
    left, right = one(s, "Left"), one(s, "Right")
    c = two(left, right, "CoMap")
    jg = compile_([sink(c)])
    assert chains(jg) == [["Source: events", "Left", "Right", "CoMap", "Sink: out"]]
    (v,) = jg.vertices
    by_name = {o.name: o for o in v.operators}
    assert sorted(o.target_node_id for o in by_name["Source: events"].chained_outputs) == [left.id, right.id]
    assert [(o.target_node_id, o.type_number) for o in by_name["Right"].chained_outputs] == [(c.id, 1)]
    assert [(o.target_node_id, o.type_number) for o in by_name["Left"].chained_outputs] == [(c.id, 0)]


def test_dag_chain_not_when_one_input_is_not_chainable() -> None:
    s = source()
    left, right = one(s, "Left"), one(partition(s, PartitionerKind.REBALANCE), "Right")
    c = two(left, right, "CoMap")
    jg = compile_([sink(c)])
    assert chains(jg) == [["Source: events", "Left"], ["Right"], ["CoMap", "Sink: out"]]


def test_union_of_one_chain_branches_chains() -> None:
    s = source()
    u = union(one(s, "A"), one(s, "B"))
    jg = compile_([sink(u)])
    assert len(jg.vertices) == 1


def test_network_outputs_datasets_and_key_selector_bytes() -> None:
    s = source()
    m = one(s, "Map")
    w = one(key_by(m, "user"), "Window", keyed=True)
    jg = compile_([sink(w)])
    first, second = jg.topological_vertices()
    (ds,) = first.produced_datasets
    assert ds.producer_node_id == m.id and ds.partitioner.kind is PartitionerKind.HASH
    assert cloudpickle.loads(ds.partitioner.key_selector) == "user"
    assert ds.result_type is ResultPartitionType.PIPELINED_BOUNDED
    assert first.operators[1].network_outputs == [ds.id] and first.operators[0].network_outputs == []
    (edge,) = second.inputs
    assert (edge.dataset_id, edge.source_vertex_id, edge.target_vertex_id, edge.target_node_id) == (
        ds.id, first.id, second.id, w.id)
    assert jg.consumers_of(ds.id) == [edge]
    op = cloudpickle.loads(second.operators[0].operator_factory)()
    assert isinstance(op, DummyOperator) and op.label == "Window" and second.operators[0].keyed


def test_batch_mode_makes_all_network_edges_blocking() -> None:
    s = source()
    jg = compile_([sink(key_by(s), keyed=True)], mode="BATCH")
    assert jg.job_type is JobType.BATCH
    assert jg.vertices[0].produced_datasets[0].result_type is ResultPartitionType.BLOCKING


def test_ids_are_deterministic_hex() -> None:
    s = source(uid="s")
    out = sink(key_by(s), keyed=True)
    sg = generate_stream_graph([out], "job", 2)
    a, b = build_job_graph(sg), build_job_graph(sg)
    assert [v.id for v in a.vertices] == [v.id for v in b.vertices]
    assert [d.id for v in a.vertices for d in v.produced_datasets] == [d.id for v in b.vertices for d in v.produced_datasets]
    int(a.vertices[0].id, 16)
    assert a.job_id != b.job_id  # a fresh job id unless given


def test_coordinator_pickled_and_config_copied() -> None:
    s = source(coordinator_provider={"c": 1})
    config: dict[str, str] = {"x": True}  # type: ignore[dict-item]  # not a string: the config is copied as it is
    jg = build_job_graph(generate_stream_graph([sink(s)], "job", 1, config=config))
    assert cloudpickle.loads(jg.vertices[0].operators[0].coordinator_provider) == {"c": 1}
    assert jg.vertices[0].operators[1].coordinator_provider is None
    assert jg.config == {"x": "true", "execution.runtime-mode": "STREAMING"}  # the resolved mode


@pytest.mark.parametrize(
    "source_p, map_p, map_group, expected",
    [(2, 4, None, 4), (2, 4, "other", 6), (3, 3, "other", 6), (1, 1, None, 1)],
)
def test_slots_required(source_p: int, map_p: int, map_group: str | None, expected: int) -> None:
    s = source(parallelism=source_p)
    m = one(s, "Map", parallelism=map_p, slot_sharing_group=map_group)
    jg = compile_([sink(m, parallelism=map_p)])
    assert jg.slots_required() == expected


def test_resources_merged_over_chain() -> None:
    s = source(resources={"cpu_cores": 0.5, "task_heap_mb": 100})
    out = sink(s, resources={"cpu_cores": 0.25})
    (v,) = compile_([out]).vertices
    assert v.resources is not None and v.resources.cpu_cores == 0.75 and v.resources.task_heap_mb == 100
    assert v.resources.managed_memory_mb is None


def test_json_round_trip_keeps_operator_bytes() -> None:
    s = source()
    jg = compile_([sink(one(key_by(s, "k"), "W", keyed=True))])
    back = JobGraph.model_validate_json(jg.model_dump_json())
    assert back == jg
    op = cloudpickle.loads(back.vertices[1].operators[0].operator_factory)()
    assert op.label == "W"
    assert cloudpickle.loads(back.vertices[0].produced_datasets[0].partitioner.key_selector) == "k"


def test_stream_unioned_with_itself_gets_two_datasets() -> None:
    s = source()
    out = sink(partition(union(s, s), PartitionerKind.REBALANCE))
    first, second = compile_([out]).topological_vertices()
    assert len(first.produced_datasets) == 2 and len({d.id for d in first.produced_datasets}) == 2
    assert sorted(first.operators[0].network_outputs) == sorted(d.id for d in first.produced_datasets)
    assert sorted(e.dataset_id for e in second.inputs) == sorted(d.id for d in first.produced_datasets)
