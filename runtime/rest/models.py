"""Request and response bodies of the REST API, with Flink's field names (dashed ones via aliases).

Flink's REST API is the model wherever Flink has the same resource: `/overview`
(ClusterOverviewWithVersion), `/jobs` (JobIdsWithStatusOverview), `/jobs/overview`
(MultipleJobsDetails), `/jobs/{id}` (JobDetailsInfo), `/jobs/{id}/exceptions`
(JobExceptionsInfoWithHistory), `/jobs/{id}/checkpoints` (CheckpointingStatistics), `/taskmanagers`
(TaskManagersInfo).
The mapping functions from the runtime's messages to these bodies are pure (unit-tested).
"""
from __future__ import annotations

from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from runtime.core.checkpoint import CheckpointingMode
from runtime.core.states import ExecutionState, JobStatus, aggregate_vertex_state
from runtime.jobmanager.checkpoint import stats as cs
from runtime.rpc import messages as m

EXCEPTION_HISTORY_SIZE = 16  # Flink's web.exception-history-size default
CHECKPOINT_HISTORY_SIZE = 10  # Flink's web.checkpoints.history default


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


class HighAvailabilityInfo(RestModel):
    """This JobManager's part in high availability (absent without it)."""

    type: str = "zookeeper"
    quorum: str | None = None
    cluster_id: str | None = None
    storage_dir: str | None = None
    role: str = Field("standby", description="leader, standby, or recovering (elected, recovering its jobs before clients are sent to it)")
    leader_session_id: str | None = Field(None, description="this JobManager's leader session id while it leads")
    leader: dict[str, Any] | None = Field(None, description="the current leader's information (REST URL, session id, host:pid)")
    zookeeper_connection: str | None = Field(None, description="CONNECTED, SUSPENDED (connection lost) or LOST (session expired)")
    contender_id: str | None = None


class ClusterInfo(RestModel):
    mode: Literal["session", "per-job", "application"]
    started_at_ms: int
    pid: int
    millrace_version: str
    application: ApplicationStatus | None = None
    high_availability: HighAvailabilityInfo | None = None


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
    task_off_heap_memory: int = Field(0, alias="taskOffHeapMemory")
    managed_memory: int = Field(alias="managedMemory")


class SlotInfo(RestModel):
    """One allocated slot of a TaskManager (Flink: TaskManagerDetailsInfo's allocatedSlots)."""

    index: int
    resource: ResourceInfo
    job_id: str | None = Field(None, alias="jobId")
    allocation_id: str | None = Field(None, alias="allocationId")
    state: str


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
    allocated_resource: ResourceInfo | None = Field(None, alias="allocatedResource")
    default_slot_resource: ResourceInfo | None = Field(None, alias="defaultSlotResource", description="what a group without resources gets")
    dynamic_slots: bool = Field(False, alias="dynamicSlots", description="slots are cut to each group's resources (fine-grained)")
    allocated_slots: list[SlotInfo] = Field(default_factory=list, alias="allocatedSlots")
    memory_rss_mb: float | None = Field(None, alias="memoryRssMb", description="resident memory at its last heartbeat")
    memory_budget_mb: int | None = Field(None, alias="memoryBudgetMb", description="what its memory watchdog holds it to")
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
    """Where and why a task or job failed (Flink: JobExceptionsInfoWithHistory.ExceptionInfo)."""

    exception_name: str = Field(alias="exceptionName", description="the exception's type name")
    message: str = Field(description="the exception's message")
    operator: str | None = Field(None, description="the operator that raised it, when known")
    task_name: str | None = Field(None, alias="taskName", description="the failing task, '<vertex> (i/p)#attempt'; null for a job-wide failure")
    taskmanager_id: str | None = Field(None, alias="taskManagerId", description="the TaskManager the task ran on")
    location: str | None = Field(None, description="where it happened: the TaskManager the task ran on (Flink: location)")
    timestamp: int | None = Field(None, description="when it happened, ms since the epoch")
    stacktrace: str = Field("", description="the failing task's Python traceback")
    failure_labels: dict[str, str] = Field(default_factory=dict, alias="failureLabels", description="Flink's failure enricher labels (none are attached yet)")


class RootExceptionInfo(ExceptionInfo):
    """One failure the job handled, newest first (Flink: JobExceptionsInfoWithHistory.RootExceptionInfo)."""

    concurrent_exceptions: list[ExceptionInfo] = Field(
        default_factory=list, alias="concurrentExceptions", description="failures that came with this one (e.g. other subtasks failing at once)"
    )
    restarted_tasks: int = Field(0, alias="restartedTasks", description="how many subtasks were restarted because of it (0: the job failed)")
    global_failure: bool = Field(False, alias="globalFailure", description="whether it concerned the whole job (every task restarted)")


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
    busy_time_ms_per_second: int = Field(0, alias="busyTimeMsPerSecond", description="ms per second neither idle nor backpressured (Flink's metric)")
    failure: ExceptionInfo | None = None
    # speculative execution: the subtask's other attempts that ran beside this one (Flink's field)
    other_concurrent_attempts: list[SubtaskInfo] = Field(default_factory=list, alias="other-concurrent-attempts")


class VertexInfo(_Timespan):
    """Flink: JobDetailsInfo.JobVertexDetailsInfo, with its subtasks inline."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int = Field(alias="maxParallelism")
    slot_sharing_group: str = Field(alias="slot-sharing-group")
    slot_sharing_group_resource: ResourceInfo | None = Field(
        None, alias="slot-sharing-group-resource", description="the group's slot requirement; null: a default slot (UNKNOWN)"
    )
    status: ExecutionState
    tasks: dict[str, int]
    metrics: IOMetrics
    backpressure_ratio: float = Field(alias="backpressure-ratio")
    backpressure_level: BackpressureLevel = Field(alias="backpressure-level")
    busy_time_ms_per_second: int = Field(0, alias="busyTimeMsPerSecond", description="the mean of its running subtasks'")
    subtasks: list[SubtaskInfo]


class RegionInfo(RestModel):
    """A pipelined region (Millrace: Flink's REST API does not show them). Batch jobs schedule regions
    lazily: CREATED means waiting for its blocking inputs, SCHEDULED waiting for slots."""

    index: int
    status: ExecutionState
    subtasks: list[str]
    blocking_inputs: int = Field(0, alias="blocking-inputs")
    blocking_inputs_committed: int = Field(0, alias="blocking-inputs-committed")


class RescaleInfo(RestModel):
    """One change of a running job's parallelism."""

    timestamp: int
    from_parallelism: dict[str, int] = Field(alias="from", description="vertex name -> parallelism before")
    to_parallelism: dict[str, int] = Field(alias="to", description="vertex name -> parallelism after")
    cause: str
    downtime: int | None = Field(None, description="ms from the rescale's trigger to every task RUNNING at the new parallelism")


class JobDetails(_Timespan):
    """Flink: JobDetailsInfo (plus `regions`)."""

    jid: str
    name: str
    state: JobStatus
    now: int
    timestamps: dict[str, int]
    vertices: list[VertexInfo]
    status_counts: dict[str, int] = Field(alias="status-counts")
    root_exception: ExceptionInfo | None = Field(None, alias="root-exception")
    regions: list[RegionInfo] = Field(default_factory=list, description="pipelined regions in topological order")
    scheduler: str = Field("default", description="jobmanager.scheduler: default, adaptive or reactive")
    scheduler_state: str | None = Field(None, alias="scheduler-state", description="the adaptive scheduler's state (Executing, Restarting, ...)")
    rescales: list[RescaleInfo] = Field(default_factory=list, description="the adaptive scheduler's rescale history, oldest first")


class ParallelismBounds(RestModel):
    lower_bound: int = Field(1, ge=1, alias="lowerBound")
    upper_bound: int = Field(ge=1, alias="upperBound")


class VertexResourceRequirements(RestModel):
    """Flink 1.18: JobVertexResourceRequirements."""

    parallelism: ParallelismBounds


class TaskManagerCountRequest(RestModel):
    taskmanagers: int = Field(ge=0, le=10_000, description="how many TaskManagers the cluster runs from now on")


class ExceptionHistory(RestModel):
    """Flink: JobExceptionsInfoWithHistory.JobExceptionHistory."""

    entries: list[RootExceptionInfo] = Field(description=f"the failures, newest first (at most {EXCEPTION_HISTORY_SIZE})")
    truncated: bool = Field(False, description="whether older failures were left out")


class JobExceptions(RestModel):
    """Flink: JobExceptionsInfoWithHistory (`root-exception` is the one-line description), plus restarts."""

    root_exception: str | None = Field(None, alias="root-exception", description="why the job failed; null unless it is failing or failed")
    timestamp: int | None = Field(None, description="when the job started failing, ms since the epoch")
    exception_history: ExceptionHistory = Field(alias="exceptionHistory")
    restarts: int = Field(0, description="how often the job (or part of it) was restarted after a failure")
    restart_strategy: str = Field(
        "", alias="restartStrategy", description="the job's restart strategy, e.g. 'fixed-delay (3 attempts, 1000 ms)'; 'none' when a failure fails the job"
    )


# --- checkpoints ---------------------------------------------------------------------------------
CheckpointStatus = Literal["IN_PROGRESS", "COMPLETED", "FAILED"]


class CheckpointStatistics(RestModel):
    """One checkpoint (Flink: CheckpointStatistics with its Completed/Failed fields); times in ms since the epoch."""

    id: int
    status: CheckpointStatus
    is_savepoint: bool = Field(False, description="a savepoint (kept in its own Delta table until disposed), not a checkpoint")
    trigger_timestamp: int = Field(description="when the JobMaster triggered it")
    latest_ack_timestamp: int = Field(-1, description="the latest subtask acknowledgement; -1: none yet")
    end_to_end_duration: int = Field(
        0, description="ms from trigger to the last subtask's acknowledgement, as Flink's (or to failure; so far while in progress)"
    )
    commit_duration: int | None = Field(
        None,
        description="ms from the last acknowledgement until the checkpoint was committed to Delta (it exists from then); "
        "trigger -> committed is end_to_end_duration + commit_duration",
    )
    state_size: int = Field(0, description="bytes of state the subtasks wrote")
    num_subtasks: int = Field(0, description="subtasks that take part")
    num_acknowledged_subtasks: int = Field(0, description="subtasks that acknowledged it")
    external_path: str | None = Field(None, description="where a completed checkpoint is stored (its Delta table)")
    failure_timestamp: int | None = Field(None, description="when a failed checkpoint was given up")
    failure_message: str | None = Field(None, description="why a failed checkpoint was given up")


class RestoredCheckpointStatistics(RestModel):
    """Flink: CheckpointingStatistics.RestoredCheckpointStatistics (the id only)."""

    id: int = Field(description="the checkpoint the job last restored its state from")


class CheckpointCounts(RestModel):
    """Flink: CheckpointingStatistics.Counts."""

    restored: int = Field(0, description="restores from a checkpoint")
    total: int = Field(0, description="checkpoints triggered")
    in_progress: int = Field(0, description="checkpoints pending now")
    completed: int = 0
    failed: int = 0


class LatestCheckpoints(RestModel):
    """Flink: CheckpointingStatistics.LatestCheckpoints."""

    completed: CheckpointStatistics | None = None
    savepoint: CheckpointStatistics | None = Field(None, description="the latest completed savepoint (its external_path is the path run -s takes)")
    failed: CheckpointStatistics | None = None
    restored: RestoredCheckpointStatistics | None = None


class CheckpointingSettings(RestModel):
    """How the job checkpoints (Millrace's addition to Flink's shape)."""

    enabled: bool = Field(description="false: the job takes no checkpoints (enable with env.enable_checkpointing(ms))")
    interval: int | None = Field(None, description="ms between checkpoints; null when disabled")
    mode: CheckpointingMode | None = Field(None, description="null when disabled")
    path: str | None = Field(None, description="the job's checkpoint Delta table; null when disabled")


class CheckpointingStatistics(RestModel):
    """Flink: CheckpointingStatistics (GET /jobs/{id}/checkpoints) plus the job's `checkpointing` settings."""

    counts: CheckpointCounts
    latest: LatestCheckpoints
    history: list[CheckpointStatistics] = Field(description=f"the latest checkpoints, newest first (at most {CHECKPOINT_HISTORY_SIZE})")
    checkpointing: CheckpointingSettings


class JobStatusChange(RestModel):
    status: JobStatus
    timestamp: int
    cause: str | None = None


class JobHistory(RestModel):
    history: list[JobStatusChange]


class SavepointTriggerRequest(RestModel):
    """Flink: SavepointTriggerRequestBody / StopWithSavepointRequestBody."""

    target_directory: str | None = Field(
        None, alias="target-directory", max_length=4096,
        description="folder for the savepoint; default state.savepoints.dir, else <warehouse>/_savepoints/<job name>",
    )
    cancel_job: bool = Field(False, alias="cancel-job", description="stop the job once the savepoint completed (as POST /jobs/{id}/stop)")


class StopWithSavepointRequest(RestModel):
    target_directory: str | None = Field(None, alias="targetDirectory", max_length=4096, description="folder for the savepoint")
    drain: bool = Field(False, description="emit a MAX watermark first, so every event-time window fires")


class TriggerResponse(RestModel):
    """Flink: TriggerResponse."""

    request_id: str = Field(alias="request-id")


class QueueStatus(RestModel):
    id: Literal["IN_PROGRESS", "COMPLETED"]


class SavepointOperation(RestModel):
    location: str | None = None
    failure_cause: ErrorResponse | None = Field(None, alias="failure-cause")


class SavepointStatusResponse(RestModel):
    """Flink: AsynchronousOperationResult<SavepointInfo>."""

    status: QueueStatus
    operation: SavepointOperation | None = None


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


def exception_info(error: m.ErrorInfo, timestamp: int | None = None) -> ExceptionInfo:
    return ExceptionInfo(
        exception_name=error.type_name, message=error.message, operator=error.operator, task_name=error.task,
        taskmanager_id=error.task_manager, location=error.task_manager, timestamp=timestamp, stacktrace=error.traceback,
    )


def root_exception_info(
    error: m.ErrorInfo, timestamp: int | None, concurrent: list[m.ErrorInfo] | tuple[m.ErrorInfo, ...] = (),
    restarted_tasks: int = 0, global_failure: bool = False,
) -> RootExceptionInfo:
    return RootExceptionInfo(
        **exception_info(error, timestamp).model_dump(),
        concurrent_exceptions=[exception_info(c, timestamp) for c in concurrent],
        restarted_tasks=restarted_tasks, global_failure=global_failure,
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
    busy = 0 if st.state in _TERMINAL_EXECUTION else round(st.busy_ratio * 1000)
    return SubtaskInfo(
        subtask=st.subtask_index, status=st.state, attempt=st.attempt_number, attempt_id=st.attempt_id,
        taskmanager_id=st.tm_id, host=st.host, start_time=start_time, end_time=end_time, duration=duration,
        metrics=io_metrics(st.metrics, st.backpressured_ms), backpressure_ratio=ratio,
        backpressure_level=backpressure_level(ratio), busy_time_ms_per_second=busy,
        failure=exception_info(st.failure, end) if st.failure is not None else None,
        other_concurrent_attempts=[subtask_info(other, now_ms) for other in st.other_concurrent_attempts],
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
    running = [s.busy_time_ms_per_second for s, st in zip(subtasks, v.subtasks) if st.state is ExecutionState.RUNNING]
    return VertexInfo(
        id=v.vertex_id, name=v.name, parallelism=v.parallelism, max_parallelism=v.max_parallelism,
        slot_sharing_group=v.slot_sharing_group, status=aggregate_vertex_state([st.state for st in v.subtasks]),
        slot_sharing_group_resource=_resource(v.slot_profile) if v.slot_profile is not None else None,
        start_time=start_time, end_time=end_time, duration=duration, tasks=counts, metrics=totals,
        backpressure_ratio=ratio, backpressure_level=backpressure_level(ratio), subtasks=subtasks,
        busy_time_ms_per_second=round(sum(running) / len(running)) if running else 0,
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
        regions=[
            RegionInfo(index=r.index, status=r.state, subtasks=r.subtasks, blocking_inputs=r.blocking_inputs,
                       blocking_inputs_committed=r.blocking_inputs_committed)
            for r in d.regions
        ],
        scheduler=d.scheduler, scheduler_state=d.scheduler_state,
        rescales=[
            RescaleInfo(timestamp=r.timestamp_ms, from_parallelism=r.from_parallelism, to_parallelism=r.to_parallelism, cause=r.cause,
                        downtime=r.downtime_ms)
            for r in d.rescales
        ],
    )


def _error_key(e: m.ErrorInfo) -> tuple[str, str | None, str]:
    return e.type_name, e.task, e.message


def job_exceptions(
    d: m.JobDetailsMessage, history: m.JobExceptionsMessage | None = None, max_entries: int = EXCEPTION_HISTORY_SIZE
) -> JobExceptions:
    """The job's root cause (from its details) and its exception history (from the scheduler), newest first.

    A root cause the scheduler did not record (e.g. a failure while the job was not running, or a failed
    commit at the end) becomes an entry of its own, with the other failed subtasks as its concurrent
    exceptions. Without `history`, the entries come from the job details alone.
    """
    subtask_failures = [
        (st.failure, st.state_timestamps_ms.get(st.state.value)) for v in d.vertices for st in v.subtasks if st.failure is not None
    ]
    entries: list[RootExceptionInfo] = []
    recorded: set[tuple[str, str | None, str]] = set()
    for e in history.entries if history is not None else []:
        entries.append(root_exception_info(e.error, e.timestamp_ms, e.concurrent, e.restarted_tasks, e.global_failure))
        recorded.update(_error_key(x) for x in (e.error, *e.concurrent))
    if d.error is not None and _error_key(d.error) not in recorded:
        others = [f for f, _ in subtask_failures if _error_key(f) != _error_key(d.error) and _error_key(f) not in recorded]
        entries.append(root_exception_info(d.error, d.failure_time_ms, others))
    elif d.error is None and history is None:
        entries.extend(root_exception_info(f, ts) for f, ts in subtask_failures)
    # newest first; an entry without a time (not yet known) counts as the newest
    entries.sort(key=lambda e: e.timestamp if e.timestamp is not None else float("inf"), reverse=True)
    return JobExceptions(
        root_exception=d.error.describe() if d.error is not None else None,
        timestamp=d.failure_time_ms if d.error is not None else None,
        exception_history=ExceptionHistory(entries=entries[:max_entries], truncated=len(entries) > max_entries),
        restarts=history.num_restarts if history is not None else 0,
        restart_strategy=history.restart_strategy if history is not None else "",
    )


def _checkpoint(e: cs.CheckpointStatsEntry) -> CheckpointStatistics:
    latest_ack = e.latest_ack_timestamp if e.latest_ack_timestamp is not None else -1
    # Flink's pending checkpoint: its duration so far is up to its latest acknowledgement
    duration = e.end_to_end_duration if e.end_to_end_duration is not None else max(0, latest_ack - e.trigger_timestamp) if latest_ack >= 0 else 0
    return CheckpointStatistics(
        id=e.id, status=e.status, is_savepoint=e.is_savepoint, trigger_timestamp=e.trigger_timestamp,
        latest_ack_timestamp=latest_ack, end_to_end_duration=duration, commit_duration=e.commit_duration, state_size=e.state_size,
        num_subtasks=e.num_subtasks, num_acknowledged_subtasks=e.num_acknowledged_subtasks, external_path=e.external_path,
        failure_timestamp=e.trigger_timestamp + duration if e.status == "FAILED" else None, failure_message=e.failure_message,
    )


def checkpointing_statistics(msg: m.CheckpointStatisticsMessage, max_history: int = CHECKPOINT_HISTORY_SIZE) -> CheckpointingStatistics:
    """The JobMaster's checkpoint statistics in Flink's shape, plus how the job checkpoints."""
    try:
        stats = cs.CheckpointingStatistics.model_validate_json(msg.statistics_json or "{}")
        latest = LatestCheckpoints(
            completed=_checkpoint(stats.latest_completed) if stats.latest_completed is not None else None,
            savepoint=_checkpoint(stats.latest_savepoint) if stats.latest_savepoint is not None else None,
            failed=_checkpoint(stats.latest_failed) if stats.latest_failed is not None else None,
            restored=RestoredCheckpointStatistics(id=stats.latest_restored) if stats.latest_restored is not None else None,
        )
        history = sorted((_checkpoint(e) for e in stats.history), key=lambda c: (c.trigger_timestamp, c.id), reverse=True)
        counts = CheckpointCounts(**stats.counts.model_dump())
    except pydantic.ValidationError as e:
        # the JobMaster's own data: a server-side bug, not bad input (a ValueError would make it a 400)
        raise RuntimeError(f"job {msg.job_id}: the JobMaster's checkpoint statistics are unreadable: {e}") from None
    modes = {mode.value: mode for mode in CheckpointingMode}
    return CheckpointingStatistics(
        counts=counts, latest=latest, history=history[:max_history],
        checkpointing=CheckpointingSettings(
            enabled=msg.enabled, interval=msg.interval_ms if msg.enabled else None,
            mode=modes.get(msg.mode.upper()) if msg.enabled else None, path=msg.path if msg.enabled else None,
        ),
    )


def job_overview(o: m.JobOverview, now_ms: int) -> JobOverview:
    ended = o.status.is_globally_terminal
    return JobOverview(
        jid=o.job_id, name=o.job_name, state=o.status, start_time=o.start_time_ms,
        end_time=o.start_time_ms + o.duration_ms if ended else -1,
        duration=o.duration_ms if ended else max(0, now_ms - o.start_time_ms),
    )


def _resource(profile: m.ResourceProfile) -> ResourceInfo:
    return ResourceInfo(
        cpu_cores=profile.cpu_cores, task_heap_memory=profile.task_heap_mb, managed_memory=profile.managed_memory_mb,
        task_off_heap_memory=profile.task_off_heap_mb,
    )


def task_manager_details(tm: m.TaskManagerInfo) -> TaskManagerDetails:
    total = tm.resource_profile
    if tm.free_resources is not None:
        free = tm.free_resources
    else:
        free = total.divide(tm.slots_total).multiply(tm.slots_free) if tm.slots_total > 0 else total
    return TaskManagerDetails(
        allocated_resource=_resource(tm.allocated_resources) if tm.allocated_resources is not None else None,
        default_slot_resource=_resource(tm.default_slot) if tm.default_slot is not None else None,
        dynamic_slots=tm.dynamic_slots,
        memory_rss_mb=round(tm.rss_mb, 1) if tm.rss_mb is not None else None,
        memory_budget_mb=tm.memory_budget_mb,
        allocated_slots=[
            SlotInfo(index=s.slot_index, resource=_resource(s.resource_profile or tm.default_slot or total), job_id=s.job_id,
                     allocation_id=s.allocation_id, state=s.state.value)
            for s in tm.slots
        ],
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
