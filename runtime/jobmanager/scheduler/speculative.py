"""Speculative execution for batch jobs (Flink: SpeculativeScheduler, ExecutionTimeBasedSlowTaskDetector,
BlocklistHandler).

A subtask much slower than its finished siblings gets another attempt on a TaskManager that is not
the slow one; the first attempt to finish wins and the others are cancelled. Only the winner's
output counts: its blocking partitions are the ones committed (the partition tracker commits the
first finished attempt per partition) and sinks that take part (a coordinator with
`supports_concurrent_execution_attempts`) commit only its files.

- `SpeculativeOptions`: Flink's keys and defaults.
- `SlowTaskDetector`: which running attempts are slow (pure; the clock is injected).
- `Blocklist`: TaskManagers that get no new attempts until a deadline.
- `SpeculationPolicy`: which vertices may run concurrent attempts at all.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.errors import ConfigurationError
from runtime.core.options import batch as batch_options
from runtime.core.states import ExecutionState
from runtime.graph.execution_graph import Execution, ExecutionGraph, ExecutionVertex, ExecutionVertexID
from runtime.graph.job_graph import ResultPartitionType

if TYPE_CHECKING:
    from runtime.jobmanager.scheduler.coordinators import OperatorCoordinators

# the option keys under their old names (declared in runtime.core.options.batch)
ENABLED_KEY = batch_options.SPECULATIVE_ENABLED.key
MAX_CONCURRENT_KEY = batch_options.SPECULATIVE_MAX_CONCURRENT_EXECUTIONS.key
BLOCK_DURATION_KEY = batch_options.BLOCK_SLOW_NODE_DURATION.key
CHECK_INTERVAL_KEY = batch_options.SLOW_TASK_DETECTOR_CHECK_INTERVAL.key
LOWER_BOUND_KEY = batch_options.SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_LOWER_BOUND.key
MULTIPLIER_KEY = batch_options.SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_MULTIPLIER.key
RATIO_KEY = batch_options.SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_RATIO.key

_RUNNING = (ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING)


class SpeculativeOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    enabled: bool = False
    max_concurrent_executions: int = Field(2, ge=2, description="attempts of one subtask running at once, the first included")
    block_slow_node_s: float = Field(60.0, ge=0, description="how long a slow task's TaskManager gets no new attempts")
    check_interval_s: float = Field(1.0, gt=0)
    baseline_lower_bound_s: float = Field(60.0, ge=0, description="a task is never slow before it ran this long")
    baseline_multiplier: float = Field(1.5, ge=1.0)
    baseline_ratio: float = Field(0.75, gt=0, le=1.0, description="share of a vertex's subtasks that must have finished first")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SpeculativeOptions:
        """Raises ConfigurationError naming the key (or the field) of a malformed value."""
        o = batch_options
        values = dict(
            enabled=o.SPECULATIVE_ENABLED.get(config),
            max_concurrent_executions=o.SPECULATIVE_MAX_CONCURRENT_EXECUTIONS.get(config),
            block_slow_node_s=o.BLOCK_SLOW_NODE_DURATION.get(config) / 1000.0,
            check_interval_s=o.SLOW_TASK_DETECTOR_CHECK_INTERVAL.get(config) / 1000.0,
            baseline_lower_bound_s=o.SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_LOWER_BOUND.get(config) / 1000.0,
            baseline_multiplier=o.SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_MULTIPLIER.get(config),
            baseline_ratio=o.SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_RATIO.get(config),
        )
        try:
            return cls(**values)
        except ValueError as e:  # pydantic's range checks, named by field
            raise ConfigurationError(f"speculative execution: {e}") from None


def execution_time_s(ex: Execution, now: float) -> float | None:
    """From deployment to the end (or now, if it still runs); None if it was never deployed."""
    start = ex.state_timestamps.get(ExecutionState.DEPLOYING)
    if start is None:
        return None
    end = ex.state_timestamps.get(ExecutionState.FINISHED, now) if ex.state is ExecutionState.FINISHED else now
    return max(0.0, end - start)


class SlowTaskDetector:
    """Flink's ExecutionTimeBasedSlowTaskDetector: once `baseline_ratio` of a vertex's subtasks
    finished, the baseline is max(lower bound, median of their execution times x multiplier); a
    subtask whose attempts all ran longer than that is slow."""

    def __init__(self, options: SpeculativeOptions, clock: Callable[[], float]) -> None:
        self.options = options
        self.clock = clock

    def baseline_s(self, vertices: list[ExecutionVertex], now: float) -> float | None:
        """None while too few of the vertex's subtasks have finished."""
        finished = [
            t for ev in vertices if ev.execution_state is ExecutionState.FINISHED
            for t in [execution_time_s(ev.current_execution, now)] if t is not None
        ]
        if not finished or len(finished) < math.ceil(self.options.baseline_ratio * len(vertices)):
            return None
        return max(self.options.baseline_lower_bound_s, statistics.median(finished) * self.options.baseline_multiplier)

    def detect(self, eg: ExecutionGraph) -> dict[ExecutionVertexID, list[Execution]]:
        """Slow subtasks and their running attempts (all of them ran longer than the baseline)."""
        now = self.clock()
        slow: dict[ExecutionVertexID, list[Execution]] = {}
        for ejv in eg.job_vertices:
            baseline = self.baseline_s(ejv.task_vertices, now)
            if baseline is None:
                continue
            for ev in ejv.task_vertices:
                running = [ex for ex in ev.current_executions() if ex.state in _RUNNING]
                if not running or ev.execution_state is ExecutionState.FINISHED:
                    continue
                if all((execution_time_s(ex, now) or 0.0) > baseline for ex in running):
                    slow[ev.id] = running
        return slow


class Blocklist:
    """TaskManagers that get no new attempts until their deadline (Flink: BlocklistHandler, node level)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self._until: dict[str, float] = {}

    def block(self, tm_id: str, duration_s: float) -> None:
        self._until[tm_id] = max(self._until.get(tm_id, 0.0), self.clock() + duration_s)

    def is_blocked(self, tm_id: str) -> bool:
        until = self._until.get(tm_id)
        if until is None:
            return False
        if until <= self.clock():
            del self._until[tm_id]
            return False
        return True

    def blocked(self) -> list[str]:
        return [tm for tm in list(self._until) if self.is_blocked(tm)]


class SpeculationPolicy:
    """Which vertices may run concurrent attempts (Flink: a vertex whose sources and sinks support it).

    - the vertex is a pipelined region by itself (every exchange in and out is blocking): a second
      attempt then reads committed files and writes its own, and nothing pipelined depends on which
      attempt produced what;
    - every sink in its chain has a coordinator that takes part (it commits the winner's files only);
      a sink without one (print, a user's SinkFunction, collect) would act twice;
    - every other coordinator of its operators takes part as well.
    """

    def __init__(self, eg: ExecutionGraph, coordinators: OperatorCoordinators) -> None:
        self.eg = eg
        self.coordinators = coordinators
        self._by_vertex: dict[str, str | None] = {}  # job vertex id -> why not (None: it may)

    def why_not(self, ev: ExecutionVertex) -> str | None:
        jv = ev.job_vertex
        if jv.id not in self._by_vertex:
            self._by_vertex[jv.id] = self._check(ev)
        return self._by_vertex[jv.id]

    def _check(self, ev: ExecutionVertex) -> str | None:
        jv = ev.job_vertex
        if any(ds.result_type is not ResultPartitionType.BLOCKING for ds in jv.produced_datasets) or any(
            self.eg.results[e.dataset_id].result_type is not ResultPartitionType.BLOCKING for e in jv.inputs
        ):
            return "it exchanges data through pipelined edges"
        for op in jv.operators:
            coord = self.coordinators.get(op.node_id)
            if coord is not None and not coord.supports_concurrent_execution_attempts:
                return f"the coordinator of '{op.name}' does not support concurrent attempts"
            if op.is_sink and coord is None:
                return f"sink '{op.name}' would write once per attempt"
        return None
