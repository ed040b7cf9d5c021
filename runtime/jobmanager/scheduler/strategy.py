"""When to deploy what (Flink: SchedulingStrategy).

Jobs without blocking exchanges use eager scheduling (Flink's PipelinedRegionSchedulingStrategy
degenerates to it when every exchange is pipelined: all regions at once); jobs with blocking
exchanges (batch) use pipelined-region scheduling, lazily from the sources. The strategy answers:
what to schedule at start, when a set of vertices restarts, and when blocking partitions are
committed; and which vertices must get their slots together.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from runtime.core.states import ExecutionState
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.graph.regions import PipelinedRegion


class SchedulingStrategy(Protocol):
    def start_scheduling(self) -> list[ExecutionVertexID]: ...

    def restart_tasks(self, vertices: Iterable[ExecutionVertexID]) -> list[ExecutionVertexID]: ...

    def deployment_groups(self, vertices: list[ExecutionVertexID]) -> list[list[ExecutionVertexID]]: ...

    def on_partitions_committed(self, partition_ids: Iterable[str]) -> list[ExecutionVertexID]: ...


class EagerSchedulingStrategy:
    """Everything at once, in topological order (producers before consumers)."""

    def __init__(self, execution_graph: ExecutionGraph) -> None:
        self._order = {ev.id: i for i, ev in enumerate(execution_graph.all_vertices())}

    def start_scheduling(self) -> list[ExecutionVertexID]:
        return sorted(self._order, key=self._order.__getitem__)

    def restart_tasks(self, vertices: Iterable[ExecutionVertexID]) -> list[ExecutionVertexID]:
        return sorted(set(vertices), key=self._order.__getitem__)

    def deployment_groups(self, vertices: list[ExecutionVertexID]) -> list[list[ExecutionVertexID]]:
        """Units that get slots together: all of them (a streaming job needs every task at once)."""
        return [vertices] if vertices else []

    def on_partitions_committed(self, partition_ids: Iterable[str]) -> list[ExecutionVertexID]:
        return []


class PipelinedRegionSchedulingStrategy:
    """Flink: PipelinedRegionSchedulingStrategy -- regions lazily from the sources.

    A region is scheduled once every blocking partition it reads is committed (consumable); at
    start, the regions that read none. A restarted region whose inputs are committed is scheduled
    again at once (its producers are not re-run); one whose inputs are not waits for them. A region
    whose subtasks are all FINISHED before it was ever scheduled (a recovered job's, whose results a
    JobManager before this one committed) is not scheduled. Regions are the unit: a region only
    partly recovered runs again whole (its subtasks exchange pipelined data).
    `is_committed(partition_id)` is the partition tracker's view.
    """

    def __init__(self, execution_graph: ExecutionGraph, is_committed: Callable[[str], bool]) -> None:
        self._eg = execution_graph
        self._is_committed = is_committed
        self._scheduled: set[PipelinedRegion] = set()


    def _ready(self, region: PipelinedRegion) -> bool:
        return all(self._is_committed(p) for p in region.consumed_blocking_partitions)

    def _schedule_ready(self) -> list[ExecutionVertexID]:
        # from the graph each time: adaptive batch changes a vertex's subtasks (and so its regions);
        # the graph lists regions in topological order already
        order = {ev.id: i for i, ev in enumerate(self._eg.all_vertices())}
        out: list[ExecutionVertexID] = []
        for region in self._eg.regions:
            if region not in self._scheduled and all(self._eg.vertex(v).execution_state is ExecutionState.FINISHED for v in region.vertices):
                self._scheduled.add(region)  # recovered FINISHED: nothing to run
            if region not in self._scheduled and self._ready(region):
                self._scheduled.add(region)
                out.extend(sorted(region.vertices, key=order.__getitem__))
        return out

    def start_scheduling(self) -> list[ExecutionVertexID]:
        return self._schedule_ready()

    def restart_tasks(self, vertices: Iterable[ExecutionVertexID]) -> list[ExecutionVertexID]:
        for vid in set(vertices):
            self._scheduled.discard(self._eg.region_of(vid))
        return self._schedule_ready()

    def on_partitions_committed(self, partition_ids: Iterable[str]) -> list[ExecutionVertexID]:
        return self._schedule_ready()

    def deployment_groups(self, vertices: list[ExecutionVertexID]) -> list[list[ExecutionVertexID]]:
        """One group per region (a region's tasks run together: they exchange pipelined data)."""
        groups: dict[PipelinedRegion, list[ExecutionVertexID]] = {}
        for vid in vertices:
            groups.setdefault(self._eg.region_of(vid), []).append(vid)
        return list(groups.values())
