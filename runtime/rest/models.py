"""Request and response bodies of the REST API, with Flink's field names (dashed ones via aliases).

Flink's REST API is the model wherever Flink has the same resource: `/overview`
(ClusterOverviewWithVersion), `/jobs` (JobIdsWithStatusOverview), `/jobs/overview`
(MultipleJobsDetails), `/jobs/{id}` (JobDetailsInfo), `/taskmanagers` (TaskManagersInfo).
The mapping functions from the runtime's messages to these bodies are pure (unit-tested).
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.states import ExecutionState, JobStatus
from runtime.rpc import messages as m


class RestModel(BaseModel):
    # dashed names on the wire (Flink's), snake_case in Python; both accepted when parsing. States are
    # declared as enums (the OpenAPI lists them) but kept as plain strings, as Flink's clients see them.
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True, use_enum_values=True)


class ErrorResponse(RestModel):
    """Flink's ErrorResponseBody: every error, whatever its status."""

    errors: list[str]


# --- cluster ----------------------------------------------------------------------------------
class ApplicationStatus(RestModel):
    status: Literal["RUNNING", "FINISHED", "FAILED"]
    error: str | None = None
    job_ids: list[str] = Field(default_factory=list)


class ClusterInfo(RestModel):
    mode: Literal["session", "per-job", "application"]
    started_at_ms: int
    pid: int
    millrace_version: str
    application: ApplicationStatus | None = None


class Overview(RestModel):
    """Flink: ClusterOverviewWithVersion."""

    taskmanagers: int
    slots_total: int = Field(alias="slots-total")
    slots_available: int = Field(alias="slots-available")
    jobs_running: int = Field(alias="jobs-running")
    jobs_finished: int = Field(alias="jobs-finished")
    jobs_cancelled: int = Field(alias="jobs-cancelled")
    jobs_failed: int = Field(alias="jobs-failed")
    millrace_version: str = Field(alias="millrace-version")


class DashboardConfig(RestModel):
    """Flink: DashboardConfiguration (GET /config)."""

    refresh_interval: int = Field(alias="refresh-interval")
    timezone_name: str = Field(alias="timezone-name")
    timezone_offset: int = Field(alias="timezone-offset")
    millrace_version: str = Field(alias="millrace-version")
    features: dict[str, bool] = Field(default_factory=dict)


class ResourceInfo(RestModel):
    """Flink: ResourceProfileInfo (memory in MB)."""

    cpu_cores: float = Field(alias="cpuCores")
    task_heap_memory: int = Field(alias="taskHeapMemory")
    managed_memory: int = Field(alias="managedMemory")


class HardwareDescription(RestModel):
    cpu_cores: float = Field(alias="cpuCores")
    managed_memory: int = Field(alias="managedMemory", description="bytes")
    pid: int


class TaskManagerDetails(RestModel):
    """Flink: TaskManagerInfo (`timeSinceLastHeartbeat` here is the age of the last heartbeat in ms)."""

    id: str
    path: str
    host: str
    pid: int
    data_port: int = Field(alias="dataPort")
    time_since_last_heartbeat: int = Field(alias="timeSinceLastHeartbeat")
    slots_number: int = Field(alias="slotsNumber")
    free_slots: int = Field(alias="freeSlots")
    total_resource: ResourceInfo = Field(alias="totalResource")
    free_resource: ResourceInfo = Field(alias="freeResource")
    hardware: HardwareDescription
    spark_executor_id: str | None = Field(None, alias="sparkExecutorId")


class TaskManagersList(RestModel):
    taskmanagers: list[TaskManagerDetails]


# --- jobs -------------------------------------------------------------------------------------
class _Timespan(RestModel):
    """Flink's start-time / end-time / duration, in ms (`end-time` is -1 while it runs)."""

    start_time: int = Field(alias="start-time")
    end_time: int = Field(alias="end-time")
    duration: int


class JobIdWithStatus(RestModel):
    id: str
    status: JobStatus


class JobIdsWithStatus(RestModel):
    """Flink: JobIdsWithStatusOverview (GET /jobs)."""

    jobs: list[JobIdWithStatus]


class JobOverview(_Timespan):
    """Flink: JobDetails as listed by GET /jobs/overview (`end-time` is -1 while the job runs)."""

    jid: str
    name: str
    state: JobStatus


class MultipleJobsDetails(RestModel):
    jobs: list[JobOverview]


class JobSubmitResponse(RestModel):
    jobid: str
    job_url: str = Field(alias="jobUrl")


class IOMetrics(RestModel):
    """Flink: IOMetricsInfo; bytes are in-memory sizes (exact for columnar batches, estimated for objects)."""

    read_bytes: int = Field(0, alias="read-bytes")
    write_bytes: int = Field(0, alias="write-bytes")
    read_records: int = Field(0, alias="read-records")
    write_records: int = Field(0, alias="write-records")
    accumulated_backpressured_time: int = Field(0, alias="accumulated-backpressured-time", description="ms")


class ExceptionInfo(RestModel):
    """Where and why a job failed (Flink: the root exception of JobExceptionsInfoWithHistory)."""

    exception_name: str = Field(alias="exceptionName")
    message: str
    operator: str | None = None
    task_name: str | None = Field(None, alias="taskName")
    taskmanager_id: str | None = Field(None, alias="taskManagerId")
    timestamp: int | None = None
    stacktrace: str = Field("", description="the failing task's Python traceback")


BackpressureLevel = Literal["ok", "low", "high"]


class SubtaskInfo(_Timespan):
    """Flink: SubtaskExecutionAttemptDetailsInfo plus the subtask's backpressure."""

    subtask: int
    status: ExecutionState
    attempt: int
    attempt_id: str = Field(alias="attempt-id")
    taskmanager_id: str | None = Field(None, alias="taskmanager-id")
    host: str | None = None
    metrics: IOMetrics
    backpressure_ratio: float = Field(alias="backpressure-ratio")
    backpressure_level: BackpressureLevel = Field(alias="backpressure-level")
    failure: ExceptionInfo | None = None


class VertexInfo(_Timespan):
    """Flink: JobDetailsInfo.JobVertexDetailsInfo, with its subtasks inline."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int = Field(alias="maxParallelism")
    slot_sharing_group: str = Field(alias="slot-sharing-group")
    status: ExecutionState
    tasks: dict[str, int]
    metrics: IOMetrics
    backpressure_ratio: float = Field(alias="backpressure-ratio")
    backpressure_level: BackpressureLevel = Field(alias="backpressure-level")
    subtasks: list[SubtaskInfo]


class JobDetails(_Timespan):
    """Flink: JobDetailsInfo."""

    jid: str
    name: str
    state: JobStatus
    now: int
    timestamps: dict[str, int]
    vertices: list[VertexInfo]
    status_counts: dict[str, int] = Field(alias="status-counts")
    root_exception: ExceptionInfo | None = Field(None, alias="root-exception")


class ExceptionHistory(RestModel):
    entries: list[ExceptionInfo]
    truncated: bool = False


class JobExceptions(RestModel):
    """Flink: JobExceptionsInfoWithHistory (`root-exception` is the one-line description)."""

    root_exception: str | None = Field(None, alias="root-exception")
    timestamp: int | None = None
    exception_history: ExceptionHistory = Field(alias="exceptionHistory")


class JobStatusChange(RestModel):
    status: JobStatus
    timestamp: int
    cause: str | None = None


class JobHistory(RestModel):
    history: list[JobStatusChange]


class CoordinationPayload(RestModel):
    """A coordination request or response: cloudpickle bytes, base64-encoded."""

    payload: str


# --- mapping (pure) ----------------------------------------------------------------------------
def backpressure_level(ratio: float) -> BackpressureLevel:
    """Flink's thresholds: up to 10% of the time blocked is ok, up to 50% low, above that high."""
    if ratio <= 0.10:
        return "ok"
    if ratio <= 0.50:
        return "low"
    return "high"


_TERMINAL_EXECUTION = (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


def aggregate_vertex_state(states: list[ExecutionState]) -> ExecutionState:
    """A vertex's state from its subtasks' (Flink: ExecutionJobVertex.getAggregateJobVertexState)."""
    if not states:
        return ExecutionState.CREATED
    present = set(states)
    for st in (ExecutionState.FAILED, ExecutionState.CANCELING, ExecutionState.CANCELED, ExecutionState.INITIALIZING, ExecutionState.RUNNING):
        if st in present:
            return st
    if present == {ExecutionState.FINISHED}:
        return ExecutionState.FINISHED
    if ExecutionState.FINISHED in present:
        return ExecutionState.RUNNING  # some finished, others not started yet: the vertex still runs
    for st in (ExecutionState.DEPLOYING, ExecutionState.SCHEDULED):
        if st in present:
            return st
    return ExecutionState.CREATED


def exception_info(error: m.ErrorInfo, timestamp: int | None = None) -> ExceptionInfo:
    return ExceptionInfo(
        exception_name=error.type_name, message=error.message, operator=error.operator, task_name=error.task,
        taskmanager_id=error.task_manager, timestamp=timestamp, stacktrace=error.traceback,
    )


def io_metrics(snap: m.TaskMetricsSnapshot, backpressured_ms: int = 0) -> IOMetrics:
    return IOMetrics(
        read_bytes=snap.bytes_in, write_bytes=snap.bytes_out, read_records=snap.records_in,
        write_records=snap.records_out, accumulated_backpressured_time=backpressured_ms,
    )


def _span(start: int | None, end: int | None, now_ms: int) -> tuple[int, int, int]:
    """(start, end, duration) with Flink's -1 for 'not yet'."""
    if start is None:
        return -1, -1 if end is None else end, -1
    if end is None:
        return start, -1, max(0, now_ms - start)
    return start, end, max(0, end - start)


def subtask_info(st: m.SubtaskDetails, now_ms: int) -> SubtaskInfo:
    ts = st.state_timestamps_ms
    # Flink: a subtask's start is its deployment; its end the first terminal state
    start = ts.get(ExecutionState.DEPLOYING.value)
    end = ts.get(st.state.value) if st.state in _TERMINAL_EXECUTION else None
    start_time, end_time, duration = _span(start, end, now_ms)
    ratio = 0.0 if st.state in _TERMINAL_EXECUTION else st.backpressure_ratio
    return SubtaskInfo(
        subtask=st.subtask_index, status=st.state, attempt=st.attempt_number, attempt_id=st.attempt_id,
        taskmanager_id=st.tm_id, host=st.host, start_time=start_time, end_time=end_time, duration=duration,
        metrics=io_metrics(st.metrics, st.backpressured_ms), backpressure_ratio=ratio,
        backpressure_level=backpressure_level(ratio),
        failure=exception_info(st.failure, end) if st.failure is not None else None,
    )


def vertex_info(v: m.VertexDetails, now_ms: int) -> VertexInfo:
    subtasks = [subtask_info(st, now_ms) for st in v.subtasks]
    counts = {s.value: 0 for s in ExecutionState}
    for st in v.subtasks:
        counts[st.state.value] += 1
    starts = [s.start_time for s in subtasks if s.start_time >= 0]
    all_ended = bool(subtasks) and all(st.state in _TERMINAL_EXECUTION for st in v.subtasks)
    ends = [s.end_time for s in subtasks if s.end_time >= 0]
    start_time, end_time, duration = _span(min(starts) if starts else None, max(ends) if all_ended and ends else None, now_ms)
    totals = IOMetrics(
        read_bytes=sum(s.metrics.read_bytes for s in subtasks),
        write_bytes=sum(s.metrics.write_bytes for s in subtasks),
        read_records=sum(s.metrics.read_records for s in subtasks),
        write_records=sum(s.metrics.write_records for s in subtasks),
        accumulated_backpressured_time=sum(s.metrics.accumulated_backpressured_time for s in subtasks),
    )
    ratio = max((s.backpressure_ratio for s in subtasks), default=0.0)  # Flink: the worst subtask
    return VertexInfo(
        id=v.vertex_id, name=v.name, parallelism=v.parallelism, max_parallelism=v.max_parallelism,
        slot_sharing_group=v.slot_sharing_group, status=aggregate_vertex_state([st.state for st in v.subtasks]),
        start_time=start_time, end_time=end_time, duration=duration, tasks=counts, metrics=totals,
        backpressure_ratio=ratio, backpressure_level=backpressure_level(ratio), subtasks=subtasks,
    )


def job_details(d: m.JobDetailsMessage, now_ms: int) -> JobDetails:
    vertices = [vertex_info(v, now_ms) for v in d.vertices]
    counts = {s.value: 0 for s in ExecutionState}
    for v in d.vertices:
        for st in v.subtasks:
            counts[st.state.value] += 1
    # Flink lists every status with 0 for the ones the job never reached
    timestamps = {s.value: d.status_timestamps_ms.get(s.value, 0) for s in JobStatus}
    end = d.end_time_ms if d.status.is_globally_terminal else None
    start_time, end_time, duration = _span(d.start_time_ms, end, now_ms)
    return JobDetails(
        jid=d.job_id, name=d.job_name, state=d.status, start_time=start_time, end_time=end_time, duration=duration,
        now=now_ms, timestamps=timestamps, vertices=vertices, status_counts=counts,
        root_exception=exception_info(d.error, d.failure_time_ms) if d.error is not None else None,
    )


def job_exceptions(d: m.JobDetailsMessage) -> JobExceptions:
    entries = []
    if d.error is not None:
        entries.append(exception_info(d.error, d.failure_time_ms))
    # subtask failures other than the root cause (e.g. several subtasks failing at once)
    for v in d.vertices:
        for st in v.subtasks:
            f = st.failure
            if f is not None and (d.error is None or (f.message, f.task) != (d.error.message, d.error.task)):
                entries.append(exception_info(f, st.state_timestamps_ms.get(st.state.value)))
    return JobExceptions(
        root_exception=d.error.describe() if d.error is not None else None,
        timestamp=d.failure_time_ms if d.error is not None else None,
        exception_history=ExceptionHistory(entries=entries),
    )


def job_overview(o: m.JobOverview, now_ms: int) -> JobOverview:
    ended = o.status.is_globally_terminal
    return JobOverview(
        jid=o.job_id, name=o.job_name, state=o.status, start_time=o.start_time_ms,
        end_time=o.start_time_ms + o.duration_ms if ended else -1,
        duration=o.duration_ms if ended else max(0, now_ms - o.start_time_ms),
    )


def _resource(profile: m.ResourceProfile) -> ResourceInfo:
    return ResourceInfo(cpu_cores=profile.cpu_cores, task_heap_memory=profile.task_heap_mb, managed_memory=profile.managed_memory_mb)


def task_manager_details(tm: m.TaskManagerInfo) -> TaskManagerDetails:
    total = tm.resource_profile
    free = total.divide(tm.slots_total).multiply(tm.slots_free) if tm.slots_total > 0 else total
    return TaskManagerDetails(
        id=tm.tm_id,
        path=f"millrace://{tm.host}/{tm.pid}",
        host=tm.host,
        pid=tm.pid,
        data_port=tm.data_port,
        time_since_last_heartbeat=tm.heartbeat_age_ms,
        slots_number=tm.slots_total,
        free_slots=tm.slots_free,
        total_resource=_resource(total),
        free_resource=_resource(free),
        hardware=HardwareDescription(cpu_cores=total.cpu_cores, managed_memory=total.managed_memory_mb * 1024 * 1024, pid=tm.pid),
        spark_executor_id=tm.spark_executor_id,
    )
