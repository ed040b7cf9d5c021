"""The job as REST, the CLI and the job result show it: pure functions of an immutable snapshot.

A scheduler takes a JobSnapshot on its main thread (`take_snapshot`), where the ExecutionGraph is
consistent; every view is then a pure function of that snapshot, testable without a scheduler and
safe to compute anywhere (Flink: the ArchivedExecutionGraph behind every REST handler).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from runtime.core.states import ExecutionState, JobStatus, aggregate_vertex_state
from runtime.graph.execution_graph import Execution, ExecutionGraph, ExecutionVertex
from runtime.jobmanager.scheduler.slot_sharing import group_resource_profiles
from runtime.jobmanager.slot_pool import PhysicalSlot
from runtime.rpc import messages as m


@dataclass(frozen=True)
class AttemptView:
    subtask_index: int
    state: ExecutionState
    attempt_number: int
    attempt_id: str
    tm_id: str | None
    host: str | None
    state_timestamps_ms: tuple[tuple[str, int], ...]
    metrics: m.TaskMetricsSnapshot | None
    backpressured_ms: int
    backpressure_ratio: float
    failure: m.ErrorInfo | None
    busy_ratio: float = 0.0


@dataclass(frozen=True)
class SubtaskView:
    current: AttemptView
    speculative: tuple[AttemptView, ...] = ()
    running_since: float | None = None  # the current attempt's RUNNING time (seconds)


@dataclass(frozen=True)
class VertexView:
    vertex_id: str
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str
    subtasks: tuple[SubtaskView, ...]
    slot_profile: m.ResourceProfile | None = None  # its group's requirement (None: UNKNOWN, a default slot)


@dataclass(frozen=True)
class RegionView:
    state: ExecutionState
    subtasks: tuple[str, ...]
    blocking_inputs: int
    blocking_inputs_committed: int


@dataclass(frozen=True)
class ExceptionView:
    timestamp_ms: int
    error: m.ErrorInfo
    restarted_tasks: int
    global_failure: bool
    concurrent: tuple[m.ErrorInfo, ...] = ()


@dataclass(frozen=True)
class JobSnapshot:
    job_id: str
    job_name: str
    status: JobStatus
    start_time: float
    end_time: float | None
    now: float
    failure: m.ErrorInfo | None
    vertices: tuple[VertexView, ...]
    regions: tuple[RegionView, ...] = ()
    exceptions: tuple[ExceptionView, ...] = ()  # oldest first
    num_restarts: int = 0
    restart_strategy: str = ""
    scheduler: str = "default"
    scheduler_state: str | None = None
    rescales: tuple[m.RescaleEvent, ...] = ()
    accumulators: Mapping[str, Any] = field(default_factory=dict)


def _attempt(ev: ExecutionVertex, ex: Execution, metrics: Mapping[str, m.TaskMetricsSnapshot],
             backpressure: Mapping[str, tuple[int, float]], busy: Mapping[str, float]) -> AttemptView:
    slot = ex.assigned_resource if isinstance(ex.assigned_resource, PhysicalSlot) else None
    bp_ms, bp_ratio = backpressure.get(ex.attempt_id, (0, 0.0))
    return AttemptView(
        subtask_index=ev.subtask_index, state=ex.state, attempt_number=ex.attempt_number, attempt_id=ex.attempt_id,
        tm_id=slot.tm_id if slot is not None else None, host=slot.data_address.host if slot is not None else None,
        state_timestamps_ms=tuple((st.value, int(ts * 1000)) for st, ts in ex.state_timestamps.items()),
        metrics=metrics.get(ex.attempt_id), backpressured_ms=bp_ms,
        backpressure_ratio=0.0 if ex.state.is_terminal else bp_ratio,
        failure=ex.failure_info if isinstance(ex.failure_info, m.ErrorInfo) else None,
        busy_ratio=0.0 if ex.state.is_terminal else busy.get(ex.attempt_id, 0.0),
    )


def take_snapshot(
    eg: ExecutionGraph,
    *,
    job_name: str,
    status: JobStatus,
    start_time: float,
    end_time: float | None,
    now: float,
    failure: m.ErrorInfo | None,
    metrics: Mapping[str, m.TaskMetricsSnapshot],
    backpressure: Mapping[str, tuple[int, float]],
    busy: Mapping[str, float] | None = None,
    is_committed: Callable[[str], bool] | None = None,
    **rest: Any,
) -> JobSnapshot:
    """Copy what the views need out of the live ExecutionGraph (on the scheduler's main thread)."""
    busy = busy or {}
    profiles = group_resource_profiles(eg.job_graph)
    vertices = []
    for ejv in eg.job_vertices:
        subtasks = []
        for ev in ejv.task_vertices:
            ex = ev.current_execution
            subtasks.append(SubtaskView(
                current=_attempt(ev, ex, metrics, backpressure, busy),
                speculative=tuple(_attempt(ev, s, metrics, backpressure, busy) for s in ev.speculative_executions),
                running_since=ex.state_timestamps.get(ExecutionState.RUNNING),
            ))
        vertices.append(VertexView(
            vertex_id=ejv.id, name=ejv.name, parallelism=ejv.parallelism, max_parallelism=ejv.max_parallelism,
            slot_sharing_group=ejv.job_vertex.slot_sharing_group, subtasks=tuple(subtasks),
            slot_profile=profiles.get(ejv.job_vertex.slot_sharing_group),
        ))
    committed = is_committed or (lambda _p: False)
    regions = []
    for region in eg.regions:  # in topological order
        members = sorted(region.vertices, key=lambda v: (eg.vertex(v).job_vertex.name, v.subtask_index))
        regions.append(RegionView(
            state=aggregate_vertex_state([eg.vertex(v).execution_state for v in members]),
            subtasks=tuple(eg.vertex(v).task_name_with_subtask for v in members),
            blocking_inputs=len(region.consumed_blocking_partitions),
            blocking_inputs_committed=sum(1 for p in region.consumed_blocking_partitions if committed(p)),
        ))
    return JobSnapshot(
        job_id=eg.job_id, job_name=job_name, status=status, start_time=start_time, end_time=end_time, now=now,
        failure=failure, vertices=tuple(vertices), regions=tuple(regions), **rest,
    )


def _subtask_details(a: AttemptView) -> m.SubtaskDetails:
    return m.SubtaskDetails(
        subtask_index=a.subtask_index, state=a.state, attempt_number=a.attempt_number, attempt_id=a.attempt_id,
        tm_id=a.tm_id, host=a.host, state_timestamps_ms=dict(a.state_timestamps_ms),
        metrics=a.metrics or m.TaskMetricsSnapshot(), backpressured_ms=a.backpressured_ms,
        backpressure_ratio=a.backpressure_ratio, busy_ratio=a.busy_ratio, failure=a.failure,
    )


def job_details(snap: JobSnapshot) -> m.JobDetailsMessage:
    vertices = []
    for v in snap.vertices:
        subtasks = []
        for s in v.subtasks:
            details = _subtask_details(s.current)
            details.other_concurrent_attempts = [_subtask_details(a) for a in s.speculative]
            subtasks.append(details)
        vertices.append(m.VertexDetails(
            vertex_id=v.vertex_id, name=v.name, parallelism=v.parallelism, max_parallelism=v.max_parallelism,
            slot_sharing_group=v.slot_sharing_group, subtasks=subtasks, slot_profile=v.slot_profile,
        ))
    return m.JobDetailsMessage(
        job_id=snap.job_id, job_name=snap.job_name, status=snap.status,
        start_time_ms=int(snap.start_time * 1000),
        end_time_ms=None if snap.end_time is None else int(snap.end_time * 1000),
        vertices=vertices,
        error=snap.failure if snap.status is not JobStatus.FINISHED else None,
        regions=[
            m.RegionDetails(index=i, state=r.state, subtasks=list(r.subtasks), blocking_inputs=r.blocking_inputs,
                            blocking_inputs_committed=r.blocking_inputs_committed)
            for i, r in enumerate(snap.regions, start=1)
        ],
        scheduler=snap.scheduler, scheduler_state=snap.scheduler_state, rescales=list(snap.rescales),
    )


def vertex_metrics(snap: JobSnapshot) -> list[m.VertexMetrics]:
    out = []
    for v in snap.vertices:
        current = [s.current for s in v.subtasks]
        out.append(m.VertexMetrics(
            vertex_id=v.vertex_id, name=v.name, parallelism=v.parallelism,
            records_in=sum(a.metrics.records_in for a in current if a.metrics is not None),
            records_out=sum(a.metrics.records_out for a in current if a.metrics is not None),
            subtask_states=[a.state for a in current],
        ))
    return out


def job_result(snap: JobSnapshot) -> m.JobResultMessage:
    end = snap.end_time or snap.now
    running = [s.running_since for v in snap.vertices for s in v.subtasks if s.running_since is not None]
    accumulators = dict(snap.accumulators)
    if snap.num_restarts:
        accumulators["restarts"] = snap.num_restarts
    return m.JobResultMessage(
        job_id=snap.job_id, job_name=snap.job_name, status=snap.status,
        duration_ms=int((end - snap.start_time) * 1000),
        running_ms=int((end - min(running)) * 1000) if running else None,
        error=snap.failure if snap.status is not JobStatus.FINISHED else None,
        accumulators_pickle=cloudpickle.dumps(accumulators) if accumulators else None,
        vertices=vertex_metrics(snap),
    )


def exceptions(snap: JobSnapshot) -> m.JobExceptionsMessage:
    return m.JobExceptionsMessage(
        job_id=snap.job_id, root_exception=snap.failure, num_restarts=snap.num_restarts,
        restart_strategy=snap.restart_strategy,
        entries=[
            m.ExceptionHistoryEntryMessage(timestamp_ms=e.timestamp_ms, error=e.error, restarted_tasks=e.restarted_tasks,
                                           global_failure=e.global_failure, concurrent=list(e.concurrent))
            for e in reversed(snap.exceptions)
        ],
    )
