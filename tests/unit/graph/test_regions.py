from __future__ import annotations

import pytest

from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.graph.job_graph import DistributionPattern as DP
from runtime.graph.job_graph import ResultPartitionType as RT
from runtime.graph.regions import (
    compute_logical_regions,
    compute_pipelined_regions,
    downstream_regions,
    region_failover_restart_set,
    strongly_connected_components,
)
from runtime.graph.transformations import PartitionerKind
from tests.graph_builders import hand_made_job_graph

pytestmark = pytest.mark.unit

PIPE, BLOCK = RT.PIPELINED_BOUNDED, RT.BLOCKING


def ev(name: str, i: int) -> ExecutionVertexID:
    return ExecutionVertexID(name, i)


def as_names(regions) -> list[set[str]]:
    return [{f"{v.job_vertex_id}{v.subtask_index}" for v in r.vertices} for r in regions]


def always(_: str) -> bool:
    return True


def never(_: str) -> bool:
    return False


def test_all_pipelined_one_region_per_connected_component() -> None:
    # A(2) -> B(2) pointwise; C(1) alone; D(2) -> E(2) all-to-all
    jg = hand_made_job_graph(
        [("A", 2), ("B", 2), ("C", 1), ("D", 2), ("E", 2)],
        [("A", "B", DP.POINTWISE, PIPE), ("D", "E", DP.ALL_TO_ALL, PIPE)],
    )
    eg = ExecutionGraph(jg)
    regions = sorted(as_names(eg.regions), key=sorted)
    assert regions == [{"A0", "B0"}, {"A1", "B1"}, {"C0"}, {"D0", "D1", "E0", "E1"}]
    assert all(not r.consumed_blocking_partitions for r in eg.regions)


def test_blocking_edges_split_regions() -> None:
    jg = hand_made_job_graph(
        [("A", 2), ("B", 2), ("C", 2)],
        [("A", "B", DP.ALL_TO_ALL, BLOCK), ("B", "C", DP.POINTWISE, PIPE)],
    )
    eg = ExecutionGraph(jg)
    assert as_names(eg.regions) == [{"A0"}, {"A1"}, {"B0", "C0"}, {"B1", "C1"}]
    r = eg.region_of(ev("C", 1))
    assert r == eg.region_of(ev("B", 1)) and ev("C", 1) in r
    assert r.consumed_blocking_partitions == {"A->B:0", "A->B:1"}


def test_cycle_over_blocking_edges_is_merged() -> None:
    # a_i -pipelined-> b_i and a_i -pipelined-> c_i give raw regions {a0,b0,c0}, {a1,b1,c1};
    # B -> C blocking all-to-all links them both ways (b0 -> c1, b1 -> c0): one cycle, one region
    jg = hand_made_job_graph(
        [("A", 2), ("B", 2), ("C", 2)],
        [("A", "B", DP.POINTWISE, PIPE), ("A", "C", DP.POINTWISE, PIPE), ("B", "C", DP.ALL_TO_ALL, BLOCK)],
    )
    eg = ExecutionGraph(jg)
    assert as_names(eg.regions) == [{"A0", "A1", "B0", "B1", "C0", "C1"}]
    assert eg.regions[0].consumed_blocking_partitions == frozenset()


def test_regions_generic_and_logical() -> None:
    # job-vertex level: A -blocking-> B -blocking-> D, A -pipelined-> D : region graph cycle {A,D} <-> {B}
    jg = hand_made_job_graph(
        [("A", 1), ("B", 1), ("D", 1)],
        [("A", "B", DP.ALL_TO_ALL, BLOCK), ("B", "D", DP.ALL_TO_ALL, BLOCK), ("A", "D", DP.ALL_TO_ALL, PIPE)],
    )
    assert compute_logical_regions(jg) == [frozenset({"A", "B", "D"})]
    consumed = {"x": [], "y": [("r1", "x")], "z": [("r2", "y")]}
    types = {"r1": PIPE, "r2": BLOCK}
    assert compute_pipelined_regions(["x", "y", "z"], lambda v: consumed[v], types.__getitem__) == [
        frozenset({"x", "y"}), frozenset({"z"})]


def test_tarjan() -> None:
    # 0 -> 1 -> 2 -> 0, 2 -> 3, 3 -> 4 -> 3, 5
    edges = [[1], [2], [0, 3], [4], [3], []]
    assert strongly_connected_components(6, edges) == [[0, 1, 2], [3, 4], [5]]


def chain_graph(kind: PartitionerKind = PartitionerKind.HASH):
    """A(2) =blocking all-to-all=> B(2) -pipelined pointwise-> C(2) =blocking all-to-all=> D(2)."""
    return ExecutionGraph(
        hand_made_job_graph(
            [("A", 2), ("B", 2), ("C", 2), ("D", 2)],
            [("A", "B", DP.ALL_TO_ALL, BLOCK), ("B", "C", DP.POINTWISE, PIPE), ("C", "D", DP.ALL_TO_ALL, BLOCK)],
            kind=kind,
        )
    )


def names(vs: set[ExecutionVertexID]) -> set[str]:
    return {f"{v.job_vertex_id}{v.subtask_index}" for v in vs}


def test_restart_set_failed_region_and_all_downstream() -> None:
    eg = chain_graph()
    # B1 fails: its region {B1, C1}, then every consumer region of C1's blocking output: D0, D1
    assert names(region_failover_restart_set(eg, ev("B", 1), always)) == {"B1", "C1", "D0", "D1"}
    # a sink fails: only itself
    assert names(region_failover_restart_set(eg, ev("D", 0), always)) == {"D0"}


def test_restart_set_includes_producers_of_unavailable_partitions() -> None:
    eg = chain_graph()
    lost = {"A->B:0"}  # the blocking partition of A0 is gone (its TaskManager died)
    got = region_failover_restart_set(eg, ev("B", 1), lambda pid: pid not in lost)
    # A0 re-runs, so every consumer of A0 (both B/C regions) and then all of D restart
    assert names(got) == {"A0", "B0", "B1", "C0", "C1", "D0", "D1"}
    # nothing available: the whole graph
    assert len(region_failover_restart_set(eg, ev("D", 1), never)) == 8


def test_restart_set_non_deterministic_partitioner_restarts_every_downstream_region() -> None:
    eg = chain_graph(PartitionerKind.REBALANCE)
    assert not PartitionerKind.REBALANCE.is_deterministic
    failed = ev("C", 0)
    got = region_failover_restart_set(eg, failed, always)
    every_downstream = {v for r in downstream_regions(eg, eg.region_of(failed)) for v in r.vertices}
    assert every_downstream <= got and names(got) == {"B0", "C0", "D0", "D1"}


def test_regions_cached_and_restart_set_pure() -> None:
    eg = chain_graph()
    assert eg.regions is eg.regions
    a = region_failover_restart_set(eg, ev("C", 0), always)
    assert region_failover_restart_set(eg, ev("C", 0), always) == a
