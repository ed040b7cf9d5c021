from __future__ import annotations

import pytest

from runtime.core.errors import InvalidProgramError
from runtime.graph.stream_graph_generator import generate_stream_graph
from runtime.graph.transformations import (
    ChainingStrategy,
    ExchangeMode,
    OneInputTransformation,
    PartitionerKind,
    PartitionerSpec,
    PartitionTransformation,
)
from tests.graph_builders import key_by, one, partition, sink, source, two, union

pytestmark = pytest.mark.unit


def edges_of(graph, node_id: int) -> list[tuple[int, int, PartitionerKind]]:
    return sorted((e.source_id, e.type_number, e.partitioner.kind) for e in graph.nodes[node_id].in_edges)


def test_nodes_edges_and_defaults() -> None:
    s = source(parallelism=2)
    m = one(s, "Map")
    k = one(key_by(m, "user"), "Window", keyed=True, parallelism=3)
    out = sink(k)
    g = generate_stream_graph([s, m, k, out], "job", default_parallelism=4, runtime_mode="STREAMING", config={"a": "b"})

    assert set(g.nodes) == {s.id, m.id, k.id, out.id}  # the partition transformation made no node
    assert g.nodes[s.id].is_source and g.nodes[s.id].num_inputs == 0
    assert g.nodes[m.id].parallelism == 4  # default parallelism
    assert g.nodes[k.id].keyed and g.nodes[k.id].max_parallelism == 128
    assert g.nodes[out.id].is_sink and g.nodes[out.id].parallelism == 4
    # p2 -> p4 without partitioner: Flink's default REBALANCE; p4 -> p4 explicit hash; p3 -> p4 rebalance
    assert edges_of(g, m.id) == [(s.id, 0, PartitionerKind.REBALANCE)]
    assert edges_of(g, k.id) == [(m.id, 0, PartitionerKind.HASH)]
    assert g.nodes[k.id].in_edges[0].partitioner.key_selector == "user"
    assert edges_of(g, out.id) == [(k.id, 0, PartitionerKind.REBALANCE)]
    assert g.runtime_mode == "STREAMING" and g.config == {"a": "b"}


def test_equal_parallelism_defaults_to_forward() -> None:
    s = source()
    out = sink(s)
    g = generate_stream_graph([out], "job", default_parallelism=3)  # inputs are walked from the sink
    assert edges_of(g, out.id) == [(s.id, 0, PartitionerKind.FORWARD)]


def test_two_input_type_numbers() -> None:
    a, b = source("Source: a"), source("Source: b")
    c = two(a, b)
    g = generate_stream_graph([sink(c)], "job", default_parallelism=1)
    assert edges_of(g, c.id) == [(a.id, 0, PartitionerKind.FORWARD), (b.id, 1, PartitionerKind.FORWARD)]
    assert g.nodes[c.id].num_inputs == 2


def test_union_gives_one_edge_per_branch_and_partition_over_union_applies_to_all() -> None:
    a, b, c = source("Source: a"), source("Source: b"), source("Source: c")
    u = union(a, b)
    plain = sink(union(u, c), "Sink: plain")
    keyed = sink(key_by(u, "k"), "Sink: keyed", keyed=True)
    co = two(u, c, "CoMap")
    g = generate_stream_graph([plain, keyed, sink(co)], "job", default_parallelism=2)
    assert edges_of(g, plain.id) == [(a.id, 0, PartitionerKind.FORWARD), (b.id, 0, PartitionerKind.FORWARD),
                                     (c.id, 0, PartitionerKind.FORWARD)]
    assert edges_of(g, keyed.id) == [(a.id, 0, PartitionerKind.HASH), (b.id, 0, PartitionerKind.HASH)]
    assert edges_of(g, co.id) == [(a.id, 0, PartitionerKind.FORWARD), (b.id, 0, PartitionerKind.FORWARD),
                                  (c.id, 1, PartitionerKind.FORWARD)]


def test_outer_partitioner_wins_and_exchange_mode_kept() -> None:
    s = source()
    inner = key_by(s, "k")
    outer = PartitionTransformation(
        name="rebalance", input=inner, partitioner=PartitionerSpec(PartitionerKind.REBALANCE, explicit=True),
        exchange_mode=ExchangeMode.BATCH,
    )
    out = sink(outer)
    g = generate_stream_graph([out], "job", default_parallelism=2)
    (e,) = g.nodes[out.id].in_edges
    assert e.partitioner.kind is PartitionerKind.REBALANCE and e.exchange_mode is ExchangeMode.BATCH


def test_explicit_forward_with_parallelism_change_names_both_operators() -> None:
    s = source("Source: events", parallelism=2)
    out = sink(partition(s, PartitionerKind.FORWARD), "Sink: wide", parallelism=4)
    with pytest.raises(InvalidProgramError, match=r"Source: events.*Sink: wide"):
        generate_stream_graph([out], "job", default_parallelism=2)


def test_implicit_forward_with_parallelism_change_falls_back_to_rebalance() -> None:
    s = source(parallelism=2)
    out = sink(partition(s, PartitionerKind.FORWARD, explicit=False), parallelism=4)
    g = generate_stream_graph([out], "job", default_parallelism=2)
    assert edges_of(g, out.id) == [(s.id, 0, PartitionerKind.REBALANCE)]


def test_no_sink_error_message() -> None:
    s = source()
    with pytest.raises(InvalidProgramError) as exc:
        generate_stream_graph([s, one(s)], "wordcount", default_parallelism=1)
    assert str(exc.value) == "job 'wordcount' has no sink: add print(), sink_to(...) or execute_and_collect()"


def test_operator_factory_must_be_callable() -> None:
    s = source()
    bad = OneInputTransformation(
        name="Broken", input=s, is_sink=True,
        operator_factory="nope",  # type: ignore[arg-type]  # not callable: the case under test
    )
    with pytest.raises(InvalidProgramError, match="'Broken'"):
        generate_stream_graph([bad], "job", default_parallelism=1)


@pytest.mark.parametrize("p, maxp", [(0, None), (200, None), (5, 4)])
def test_parallelism_bounds(p: int, maxp: int | None) -> None:
    s = source()
    out = sink(s, "Sink: x", parallelism=p, max_parallelism=maxp)
    with pytest.raises(InvalidProgramError, match="'Sink: x'.*parallelism"):
        generate_stream_graph([out], "job", default_parallelism=1)


def test_duplicate_uid_names_both_operators() -> None:
    s = source("Source: a", uid="same")
    out = sink(s, "Sink: b", uid="same")
    with pytest.raises(InvalidProgramError, match=r"uid 'same'.*Source: a.*Sink: b"):
        generate_stream_graph([out], "job", default_parallelism=1)


def test_keyed_operator_needs_keyed_input() -> None:
    s = source()
    out = sink(s, "Sink: keyed", keyed=True)
    with pytest.raises(InvalidProgramError, match="'Sink: keyed'.*key_by"):
        generate_stream_graph([out], "job", default_parallelism=1)


def test_hash_needs_key_selector() -> None:
    s = source()
    out = sink(partition(s, PartitionerKind.HASH, None), keyed=True)
    with pytest.raises(InvalidProgramError, match="key selector"):
        generate_stream_graph([out], "job", default_parallelism=1)


def test_slot_sharing_group_inheritance() -> None:
    a = source("Source: a", slot_sharing_group="g1")
    b = source("Source: b")  # no group -> default
    ma = one(a, "MapA")  # inherits g1
    both = two(ma, b, "Join")  # inputs disagree -> default
    c = two(ma, one(a, "MapA2"), "Same")  # both g1 -> g1
    named = sink(both, "Sink", slot_sharing_group="sinks")
    g = generate_stream_graph([named, sink(c)], "job", default_parallelism=1)
    assert g.nodes[a.id].slot_sharing_group == "g1"
    assert g.nodes[b.id].slot_sharing_group == "default"
    assert g.nodes[ma.id].slot_sharing_group == "g1"
    assert g.nodes[both.id].slot_sharing_group == "default"
    assert g.nodes[c.id].slot_sharing_group == "g1"
    assert g.nodes[named.id].slot_sharing_group == "sinks"


def test_chaining_strategy_uid_and_node_max_parallelism_copied() -> None:
    s = source(uid="src", chaining_strategy=ChainingStrategy.HEAD, max_parallelism=16)
    out = sink(s, uid="snk", chaining_strategy=ChainingStrategy.NEVER)
    g = generate_stream_graph([out], "job", default_parallelism=1, max_parallelism=64)
    assert g.nodes[s.id].chaining_strategy is ChainingStrategy.HEAD and g.nodes[s.id].uid == "src"
    assert g.nodes[s.id].max_parallelism == 16 and g.nodes[out.id].max_parallelism == 64
    assert g.nodes[out.id].chaining_strategy is ChainingStrategy.NEVER


def test_runtime_modes() -> None:
    bounded = sink(source())
    assert generate_stream_graph([bounded], "j", 1, runtime_mode="AUTOMATIC").runtime_mode == "BATCH"
    assert generate_stream_graph([bounded], "j", 1, runtime_mode="batch").runtime_mode == "BATCH"
    unbounded = sink(source(bounded=False))
    assert generate_stream_graph([unbounded], "j", 1, runtime_mode="AUTOMATIC").runtime_mode == "STREAMING"
    with pytest.raises(InvalidProgramError, match="unbounded"):
        generate_stream_graph([unbounded], "j", 1, runtime_mode="BATCH")
    with pytest.raises(InvalidProgramError, match="runtime mode"):
        generate_stream_graph([bounded], "j", 1, runtime_mode="LATER")


def test_dedupe_and_long_pipeline() -> None:
    t = source()
    s = t
    for i in range(1500):  # deeper than Python's recursion limit
        t = one(t, f"Map{i}")
    out = sink(t)
    g = generate_stream_graph([s, out, out, t], "job", default_parallelism=1)
    assert len(g.nodes) == 1502
    assert len(g.topological_order()) == 1502
