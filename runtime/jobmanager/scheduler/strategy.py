"""When to deploy what (Flink: SchedulingStrategy).

Streaming jobs use eager scheduling (Flink's PipelinedRegionSchedulingStrategy degenerates to it
when every exchange is pipelined: all regions at once). The strategy answers two questions: what
to schedule at start, and what to schedule when a set of vertices restarts. Pipelined-region
(lazy from sources) scheduling for batch plugs in here.
"""
from __future__ import annotations

from typing import Iterable, Protocol

from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID


class SchedulingStrategy(Protocol):
    def start_scheduling(self) -> list[ExecutionVertexID]: ...

    def restart_tasks(self, vertices: Iterable[ExecutionVertexID]) -> list[ExecutionVertexID]: ...


class EagerSchedulingStrategy:
    """Everything at once, in topological order (producers before consumers)."""

    def __init__(self, execution_graph: ExecutionGraph) -> None:
        self._order = {ev.id: i for i, ev in enumerate(execution_graph.all_vertices())}

    def start_scheduling(self) -> list[ExecutionVertexID]:
        return sorted(self._order, key=self._order.__getitem__)

    def restart_tasks(self, vertices: Iterable[ExecutionVertexID]) -> list[ExecutionVertexID]:
        return sorted(set(vertices), key=self._order.__getitem__)
