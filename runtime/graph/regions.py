"""Pipelined regions and the region failover restart set.

Ports of Flink's PipelinedRegionComputeUtil / SchedulingPipelinedRegionComputeUtil /
LogicalPipelinedRegionComputeUtil (raw regions over pipelined edges, then cycles in the region
graph merged with Tarjan's SCC) and RestartPipelinedRegionFailoverStrategy.getTasksToRestart.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from runtime.graph.job_graph import JobGraph, ResultPartitionType

if TYPE_CHECKING:
    from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID

V = TypeVar("V", bound=Hashable)
# consumed_results_of(vertex) -> (result id, producer vertex) for every result the vertex reads
ConsumedResultsOf = Callable[[V], Iterable[tuple[str, V]]]


@dataclass(frozen=True)
class PipelinedRegion:
    """Flink's SchedulingPipelinedRegion: subtasks that must run (and restart) together."""

    vertices: frozenset[ExecutionVertexID]
    # blocking partitions produced outside the region that it reads: the region can be
    # scheduled once they are all committed (Flink: getNonPipelinedConsumedPartitionGroups)
    consumed_blocking_partitions: frozenset[str] = frozenset()

    def __contains__(self, vertex_id: object) -> bool:
        return vertex_id in self.vertices

    def __len__(self) -> int:
        return len(self.vertices)


def compute_pipelined_regions(
    vertices: Iterable[V],
    consumed_results_of: ConsumedResultsOf[V],
    result_type: Callable[[str], ResultPartitionType],
) -> list[frozenset[V]]:
    """Regions of a DAG of vertices (given in topological order); works on subtasks or job vertices.

    Flink's SchedulingPipelinedRegionComputeUtil.computePipelinedRegions: merge vertices joined by
    results that must be consumed while produced (not reconnectable), then merge regions that form
    a cycle over the remaining (blocking) edges, so the regions form a DAG.
    """
    ordered = list(vertices)
    # PipelinedRegionComputeUtil.buildRawRegions
    region_of: dict[V, set[V]] = {}
    for v in ordered:
        current: set[V] = {v}
        region_of[v] = current
        for rid, producer in consumed_results_of(v):
            if result_type(rid).is_reconnectable:
                continue
            producer_region = region_of.get(producer)
            if producer_region is None:
                raise ValueError(f"producer {producer} of {rid} is not before its consumer {v} in topological order")
            if producer_region is not current:
                current = _merge(current, producer_region, region_of)

    unique: list[set[V]] = []
    seen: set[int] = set()
    for v in ordered:  # first-seen order keeps the result deterministic
        r = region_of[v]
        if id(r) not in seen:
            seen.add(id(r))
            unique.append(r)
    return _merge_regions_on_cycles(unique, region_of, consumed_results_of)


def _merge(a: set[V], b: set[V], region_of: dict[V, set[V]]) -> set[V]:
    """PipelinedRegionComputeUtil.mergeRegions: fold the smaller set into the larger."""
    small, large = (a, b) if len(a) < len(b) else (b, a)
    for v in small:
        region_of[v] = large
    large |= small
    return large


def _merge_regions_on_cycles(
    regions: list[set[V]], region_of: dict[V, set[V]], consumed_results_of: ConsumedResultsOf[V]
) -> list[frozenset[V]]:
    """SchedulingPipelinedRegionComputeUtil.mergeRegionsOnCycles."""
    index = {id(r): i for i, r in enumerate(regions)}
    out_edges: list[list[int]] = [[] for _ in regions]
    for i, r in enumerate(regions):
        for v in r:
            for _rid, producer in consumed_results_of(v):
                j = index[id(region_of[producer])]
                if j != i and i not in out_edges[j]:
                    out_edges[j].append(i)  # producer region -> consumer region
    merged: list[frozenset[V]] = []
    for scc in strongly_connected_components(len(regions), out_edges):
        merged.append(frozenset(v for i in scc for v in regions[i]))
    # components come ordered by their first raw region, i.e. topologically by first vertex
    return merged


def strongly_connected_components(n: int, out_edges: list[list[int]]) -> list[list[int]]:
    """Tarjan's algorithm (Flink's StronglyConnectedComponentsComputeUtils), iterative.

    Each component's members are sorted; components are ordered by their smallest member.
    """
    counter = 0
    low = [0] * n
    order = [-1] * n
    on_stack = [False] * n
    stack: list[int] = []
    sccs: list[list[int]] = []
    for root in range(n):
        if order[root] != -1:
            continue
        work: list[tuple[int, int]] = [(root, 0)]
        while work:
            v, edge_i = work.pop()
            if edge_i == 0:
                order[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            recursed = False
            for k in range(edge_i, len(out_edges[v])):
                w = out_edges[v][k]
                if order[w] == -1:
                    work.append((v, k + 1))
                    work.append((w, 0))
                    recursed = True
                    break
                if on_stack[w]:
                    low[v] = min(low[v], order[w])
            if recursed:
                continue
            if low[v] == order[v]:
                comp: list[int] = []
                while True:
                    w = stack.pop()
                    on_stack[w] = False
                    comp.append(w)
                    if w == v:
                        break
                sccs.append(sorted(comp))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return sorted(sccs, key=lambda c: c[0])


def compute_regions(execution_graph: ExecutionGraph) -> list[PipelinedRegion]:
    """The pipelined regions of an ExecutionGraph, in topological order of their first subtask."""
    eg = execution_graph

    def consumed(vid: ExecutionVertexID) -> list[tuple[str, ExecutionVertexID]]:
        return [(cp.partition_id, cp.producer) for cp in eg.vertex(vid).consumed_partitions()]

    def rtype(partition_id: str) -> ResultPartitionType:
        return eg.partition(partition_id).result_type

    regions: list[PipelinedRegion] = []
    for members in compute_pipelined_regions([ev.id for ev in eg.all_vertices()], consumed, rtype):
        blocking = frozenset(
            pid
            for vid in members
            for pid, producer in consumed(vid)
            if producer not in members and rtype(pid).is_reconnectable
        )
        regions.append(PipelinedRegion(members, blocking))
    return regions


def compute_logical_regions(job_graph: JobGraph) -> list[frozenset[str]]:
    """Regions over JobVertex ids (Flink's LogicalPipelinedRegionComputeUtil)."""
    by_id = {v.id: v for v in job_graph.vertices}

    def consumed(vid: str) -> list[tuple[str, str]]:
        return [(e.dataset_id, e.source_vertex_id) for e in by_id[vid].inputs]

    return compute_pipelined_regions(
        [v.id for v in job_graph.topological_vertices()], consumed, lambda ds: job_graph.dataset(ds).result_type
    )


def region_failover_restart_set(
    execution_graph: ExecutionGraph,
    failed: ExecutionVertexID,
    is_partition_available: Callable[[str], bool],
) -> set[ExecutionVertexID]:
    """Subtasks to restart when `failed` fails (RestartPipelinedRegionFailoverStrategy.getTasksToRestart).

    The failed task's region; the producer region of every consumed partition that is no longer
    available (it must be produced again); and every consumer region of a restarted region,
    transitively (a re-run producer emits its results again). Because every consumer of a
    restarted region restarts, a non-deterministic partitioner (rebalance, shuffle, rescale)
    never leaves a downstream consumer holding data from the earlier run.
    """
    eg = execution_graph
    start = eg.region_of(failed)
    visited: set[PipelinedRegion] = {start}
    to_visit: deque[PipelinedRegion] = deque([start])
    restart: set[PipelinedRegion] = set()
    seen_partitions: set[str] = set()
    while to_visit:
        region = to_visit.popleft()
        restart.add(region)
        # if a needed input result partition is not available, its producer region is involved
        for vid in sorted(region.vertices):
            for cp in eg.vertex(vid).consumed_partitions():
                if cp.producer in region.vertices or cp.partition_id in seen_partitions:
                    continue
                seen_partitions.add(cp.partition_id)
                if not is_partition_available(cp.partition_id):
                    producer_region = eg.region_of(cp.producer)
                    if producer_region not in visited:
                        visited.add(producer_region)
                        to_visit.append(producer_region)
        # all consumer regions of an involved region are involved
        for vid in sorted(region.vertices):
            for p in eg.vertex(vid).produced_partitions.values():
                for consumer in p.consumers:
                    consumer_region = eg.region_of(consumer)
                    if consumer_region not in visited:
                        visited.add(consumer_region)
                        to_visit.append(consumer_region)
    return {v for r in restart for v in r.vertices}


def downstream_regions(execution_graph: ExecutionGraph, region: PipelinedRegion) -> set[PipelinedRegion]:
    """Every region reachable from `region` through produced partitions (excluding itself)."""
    eg = execution_graph
    out: set[PipelinedRegion] = set()
    todo: deque[PipelinedRegion] = deque([region])
    while todo:
        r = todo.popleft()
        for vid in r.vertices:
            for p in eg.vertex(vid).produced_partitions.values():
                for c in p.consumers:
                    cr = eg.region_of(c)
                    if cr is not region and cr not in out:
                        out.add(cr)
                        todo.append(cr)
    return out

