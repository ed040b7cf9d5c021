"""Pydantic messages exchanged between endpoints (JobManager <-> TaskManager, client <-> Dispatcher)."""
from __future__ import annotations

import traceback as _tb
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.core.errors import ThrowableType, throwable_type_of
from runtime.core.states import ExecutionState, JobStatus, SlotState
from runtime.rpc.deployment import DataAddress
from runtime.storage.handles import BlockingResultFile, StateFileHandle  # noqa: F401 - written by storage, carried by the protocols


class Message(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", extra="forbid")


class Ack(Message):
    ok: bool = True
    message: str = ""


class ErrorInfo(Message):
    """A failure as it crosses process boundaries: type, message, traceback, where it happened."""

    type_name: str
    message: str
    traceback: str = ""
    task: str | None = None  # "<vertex name> (i/p)#attempt"
    operator: str | None = None
    task_manager: str | None = None
    # how the scheduler treats it (non-recoverable: the job fails without a restart); decided where
    # the exception object still exists, because only its class and causes know
    throwable_type: ThrowableType = ThrowableType.RECOVERABLE_ERROR

    @classmethod
    def from_exception(cls, exc: BaseException, **where: Any) -> "ErrorInfo":
        return cls(
            type_name=type(exc).__name__,
            message=str(exc),
            traceback="".join(_tb.format_exception(type(exc), exc, exc.__traceback__)),
            throwable_type=throwable_type_of(exc),
            **where,
        )

    @property
    def is_non_recoverable(self) -> bool:
        return self.throwable_type is ThrowableType.NON_RECOVERABLE_ERROR

    def describe(self) -> str:
        where = []
        if self.operator:
            where.append(f"in operator '{self.operator}'")
        if self.task:
            where.append(f"in task {self.task}")
        if self.task_manager:
            where.append(f"on TaskManager {self.task_manager}")
        return f"{self.type_name}: {self.message}" + ("".join(f" {w}" for w in where) if where else "")


_CPU_EPSILON = 1e-9  # CPU shares are floats: 0.1 + 0.2 must fit into 0.3


class ResourceProfile(Message):
    """Resources of a TaskManager (its total) or of one slot (the total divided by the slot count).

    Flink: ResourceProfile. A requirement with no profile is Flink's UNKNOWN profile: any slot
    matches it (see `ResourceRequirement.profile`).
    """

    cpu_cores: float = Field(1.0, ge=0)
    task_heap_mb: int = Field(512, ge=0)
    managed_memory_mb: int = Field(128, ge=0)

    def fits_in(self, other: ResourceProfile) -> bool:
        """True when `other` has at least this much of every resource (a slot `other` can serve this)."""
        return (
            self.cpu_cores <= other.cpu_cores + _CPU_EPSILON
            and self.task_heap_mb <= other.task_heap_mb
            and self.managed_memory_mb <= other.managed_memory_mb
        )

    def divide(self, n: int) -> ResourceProfile:
        """One of `n` equal slots of a TaskManager with this total (memory rounds down, as Flink's)."""
        if n < 1:
            raise ValueError(f"cannot divide a resource profile into {n} slots")
        return ResourceProfile(cpu_cores=self.cpu_cores / n, task_heap_mb=self.task_heap_mb // n, managed_memory_mb=self.managed_memory_mb // n)

    def multiply(self, n: int) -> ResourceProfile:
        return ResourceProfile(cpu_cores=self.cpu_cores * n, task_heap_mb=self.task_heap_mb * n, managed_memory_mb=self.managed_memory_mb * n)

    def merge(self, other: ResourceProfile) -> ResourceProfile:
        """The sum of both (Flink: ResourceProfile.merge)."""
        return ResourceProfile(
            cpu_cores=self.cpu_cores + other.cpu_cores,
            task_heap_mb=self.task_heap_mb + other.task_heap_mb,
            managed_memory_mb=self.managed_memory_mb + other.managed_memory_mb,
        )

    def max_with(self, other: ResourceProfile) -> ResourceProfile:
        return ResourceProfile(
            cpu_cores=max(self.cpu_cores, other.cpu_cores),
            task_heap_mb=max(self.task_heap_mb, other.task_heap_mb),
            managed_memory_mb=max(self.managed_memory_mb, other.managed_memory_mb),
        )

    def min_with(self, other: ResourceProfile) -> ResourceProfile:
        return ResourceProfile(
            cpu_cores=min(self.cpu_cores, other.cpu_cores),
            task_heap_mb=min(self.task_heap_mb, other.task_heap_mb),
            managed_memory_mb=min(self.managed_memory_mb, other.managed_memory_mb),
        )

    def sort_key(self) -> tuple[float, int, int]:
        """Smallest first: best-fit matching hands out the smallest slot that fits."""
        return (self.cpu_cores, self.task_heap_mb, self.managed_memory_mb)

    def describe(self) -> str:
        return f"{self.cpu_cores:g} CPU, {self.task_heap_mb} MB task heap, {self.managed_memory_mb} MB managed memory"


# --- TaskExecutor <-> ResourceManager ---------------------------------------------------------
class RegisterTaskExecutor(Message):
    tm_id: str
    data_address: DataAddress
    num_slots: int
    resource_profile: ResourceProfile = Field(default_factory=ResourceProfile)
    pid: int
    hostname: str
    spark_executor_id: str | None = None


class RegistrationResponse(Message):
    accepted: bool
    reason: str = ""
    resource_manager_id: str = ""
    heartbeat_interval_ms: int = 1000
    heartbeat_timeout_ms: int = 10000


class SlotStatus(Message):
    slot_index: int
    state: SlotState
    allocation_id: str | None = None
    job_id: str | None = None


class SlotReport(Message):
    tm_id: str
    slots: list[SlotStatus]


class HeartbeatRequest(Message):
    sender: str
    resource_manager_id: str = ""


class TaskExecutorHeartbeat(Message):
    tm_id: str
    slot_report: SlotReport
    running_tasks: int = 0


class RequestSlot(Message):
    """RM -> TE: allocate a slot for a job and offer it to that job's JobMaster."""

    allocation_id: str
    job_id: str
    job_master_endpoint: str
    resource_manager_id: str


class FreeSlot(Message):
    allocation_id: str
    cause: str = ""


class ReleaseTaskExecutor(Message):
    cause: str = ""


# --- TaskExecutor <-> JobMaster ---------------------------------------------------------------
class SlotOffer(Message):
    allocation_id: str
    slot_index: int
    resource_profile: ResourceProfile = Field(default_factory=ResourceProfile)


class OfferSlots(Message):
    tm_id: str
    data_address: DataAddress
    job_id: str
    offers: list[SlotOffer]


class AcceptedSlots(Message):
    allocation_ids: list[str]


class CancelTask(Message):
    execution_attempt_id: str


class TaskMetricsSnapshot(Message):
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class ProducedBlockingPartition(Message):
    """What a FINISHED producer wrote for one blocking result: the JobMaster commits it to Delta."""

    partition_id: str
    dataset_id: str
    files: list[BlockingResultFile] = Field(default_factory=list)
    bytes: int = 0  # payload bytes written (adaptive batch sizes its consumers from it)


class TaskExecutionStateUpdate(Message):
    job_id: str
    execution_attempt_id: str
    state: ExecutionState
    error: ErrorInfo | None = None
    metrics: TaskMetricsSnapshot = Field(default_factory=TaskMetricsSnapshot)
    # FINISHED only: the blocking result partitions the task wrote (batch exchanges)
    blocking_partitions: list[ProducedBlockingPartition] = Field(default_factory=list)


class OperatorEventMessage(Message):
    job_id: str
    execution_attempt_id: str
    node_id: int
    subtask_index: int
    attempt_number: int
    payload: bytes  # cloudpickle of the event object


# --- checkpoints (JobMaster <-> TaskExecutor) ------------------------------------------------
class TaskStateSnapshot(Message):
    files: list[StateFileHandle] = Field(default_factory=list)
    # operator id -> state files of earlier checkpoints (this task's) that its state builds on
    # (incremental checkpoints: Flink's shared state); retention keeps them while referenced
    shared_files: dict[str, list[str]] = Field(default_factory=dict)
    # operator id -> cloudpickle of that subtask's committables (two-phase-commit sinks)
    committables: dict[str, bytes] = Field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return sum(f.size for f in self.files)


class SavepointOptions(Message):
    """What makes a triggered checkpoint a savepoint (Flink: CheckpointOptions of type SAVEPOINT)."""

    target: str  # the savepoint's Delta table; every task writes its state files there
    # stop-with-savepoint: sources emit nothing after the barrier (and, with drain, a MAX watermark
    # before it); the job ends once the savepoint completes, or goes on if it fails
    stop: bool = False
    drain: bool = False


class TriggerCheckpoint(Message):
    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    timestamp_ms: int
    mode: str = "EXACTLY_ONCE"
    savepoint: SavepointOptions | None = None


class TriggerSavepoint(Message):
    """Client -> Dispatcher -> JobMaster (Flink: triggerSavepoint / stopWithSavepoint)."""

    job_id: str
    target_directory: str | None = None  # None: state.savepoints.dir, else <warehouse>/_savepoints/<job name>
    stop: bool = False
    drain: bool = False


class SourceReachedEndOfInput(Message):
    """Source task -> JobMaster: its input ended and it holds (execution.end-of-input.savepoint)."""

    job_id: str
    execution_attempt_id: str


class SavepointTriggerId(Message):
    job_id: str
    trigger_id: str


class SavepointStatusRequest(Message):
    job_id: str
    trigger_id: str


class SavepointStatus(Message):
    """Flink's AsynchronousOperationResult of a savepoint: IN_PROGRESS, then COMPLETED with the
    location or FAILED with the cause."""

    job_id: str
    trigger_id: str
    status: str  # IN_PROGRESS | COMPLETED | FAILED
    location: str | None = None
    failure: ErrorInfo | None = None


class SavepointLocation(Message):
    location: str
    checkpoint_id: int


class AcknowledgeCheckpoint(Message):
    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    state: TaskStateSnapshot = Field(default_factory=TaskStateSnapshot)
    sync_ms: int = 0
    async_ms: int = 0
    alignment_ms: int = 0
    start_delay_ms: int = 0  # trigger -> the barrier reached this task (Flink: checkpointStartDelay)


class DeclineCheckpoint(Message):
    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    reason: str
    # False for declines that say nothing about checkpointing health (the task is not running, the
    # checkpoint was subsumed by a newer one): Flink's CheckpointFailureManager does not count them
    counts_as_failure: bool = True


class NotifyCheckpoint(Message):
    """JobMaster -> task: checkpoint complete (True) or aborted (False)."""

    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    completed: bool


class ExceptionHistoryEntryMessage(Message):
    timestamp_ms: int
    error: ErrorInfo
    restarted_tasks: int = 0
    global_failure: bool = False
    concurrent: list[ErrorInfo] = Field(default_factory=list)


class JobExceptionsMessage(Message):
    """Failures and restarts of a job (Flink: /jobs/{id}/exceptions)."""

    job_id: str
    root_exception: ErrorInfo | None = None
    num_restarts: int = 0
    restart_strategy: str = ""
    entries: list[ExceptionHistoryEntryMessage] = Field(default_factory=list)


class CheckpointStatisticsMessage(Message):
    """Checkpoint counts, latest and history (Flink: /jobs/{id}/checkpoints); the statistics as JSON."""

    job_id: str
    enabled: bool
    interval_ms: int = 0
    mode: str = ""
    path: str | None = None
    statistics_json: str = "{}"


# --- Client <-> Dispatcher --------------------------------------------------------------------
class SubmitJob(Message):
    job_graph_json: str


class JobIdMessage(Message):
    job_id: str


class JobStatusMessage(Message):
    job_id: str
    status: JobStatus


class VertexMetrics(Message):
    vertex_id: str
    name: str
    parallelism: int
    records_in: int = 0
    records_out: int = 0
    subtask_states: list[ExecutionState] = Field(default_factory=list)


class JobResultMessage(Message):
    job_id: str
    job_name: str
    status: JobStatus
    duration_ms: int
    running_ms: int | None = None  # from the first task RUNNING to the end (excludes slot/TaskManager wait)
    error: ErrorInfo | None = None
    accumulators_pickle: bytes | None = None  # cloudpickle of dict[str, Any] from coordinators
    vertices: list[VertexMetrics] = Field(default_factory=list)


class JobOverview(Message):
    job_id: str
    job_name: str
    status: JobStatus
    start_time_ms: int
    duration_ms: int


class CoordinationRequest(Message):
    job_id: str
    node_id: int
    payload: bytes  # cloudpickle


class CoordinationResponse(Message):
    payload: bytes


class Empty(Message):
    pass


# --- JobMaster <-> ResourceManager ------------------------------------------------------------
class ResourceStatus(Message):
    """The ResourceManager's view of supply: told to a job that could not get its slots."""

    task_managers: int
    pending_task_managers: int
    free_slots: int
    start_failures: int = Field(0, description="TaskManager starts that failed in a row")
    last_start_failure: str | None = None


class ResourceRequirement(Message):
    """`count` slots for one slot sharing group; `profile` None is the UNKNOWN profile, matched by any slot."""

    slot_sharing_group: str = "default"
    profile: ResourceProfile | None = None
    count: int = Field(ge=0)
    # the least that lets the job make progress (a batch job's widest region; None: `count`): a
    # cluster that can give that many is fit for the job, and it gets up to `count` as it can
    min_count: int | None = Field(None, ge=0)

    @property
    def least(self) -> int:
        return self.count if self.min_count is None else min(self.min_count, self.count)

    def describe(self) -> str:
        what = self.profile.describe() if self.profile is not None else "any resources"
        at_least = f" (at least {self.least})" if self.least < self.count else ""
        return f"{self.count} slot(s){at_least} of {what} for slot sharing group '{self.slot_sharing_group}'"


class ResourceRequirements(Message):
    """JM -> RM: what this job needs now, per slot sharing group and profile (an empty list clears).

    Flink: declareRequiredResources with a ResourceCounter. `slots=n` is accepted as n slots of the
    UNKNOWN profile (what a job without fine-grained resources needs).
    """

    job_id: str
    job_master_endpoint: str
    job_name: str = ""
    requirements: list[ResourceRequirement] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_slot_count(cls, data: Any) -> Any:
        if isinstance(data, dict) and "slots" in data:
            data = dict(data)
            n = int(data.pop("slots"))
            if "requirements" not in data:
                data["requirements"] = [{"count": n}] if n > 0 else []
        return data

    @property
    def slots(self) -> int:
        return sum(r.count for r in self.requirements)

    def describe_job(self) -> str:
        return f"job {self.job_id}" + (f" '{self.job_name}'" if self.job_name else "")


class TaskManagerLost(Message):
    tm_id: str
    cause: str


class TaskManagerStdout(Message):
    """TM -> RM: what the TaskManager's tasks printed, in order (Flink: the TaskManager's .out file)."""

    tm_id: str
    text: str


class TaskManagerIdMessage(Message):
    tm_id: str


class TaskManagerStdoutTail(Message):
    """The newest stdout of one TaskManager (REST /taskmanagers/{id}/stdout); `known` False: no such TaskManager."""

    tm_id: str
    known: bool = True
    text: str = ""
    truncated: bool = False  # older output was dropped (only the newest STDOUT_TAIL_CHARS are kept)


class TaskManagerInfo(Message):
    tm_id: str
    host: str
    pid: int
    data_port: int
    slots_total: int
    slots_free: int
    heartbeat_age_ms: int
    spark_executor_id: str | None = None
    resource_profile: ResourceProfile = Field(default_factory=ResourceProfile)


class TaskManagerList(Message):
    task_managers: list[TaskManagerInfo]


class JobList(Message):
    jobs: list[JobOverview]


# --- Job details, live task metrics, cluster overview (REST API) ------------------------------
class TaskMetricsRequest(Message):
    """JM -> TE: current metrics of these attempts (the ones the JobMaster placed on that TaskExecutor)."""

    attempt_ids: list[str]


class TaskMetricsEntry(Message):
    attempt_id: str
    state: ExecutionState
    metrics: TaskMetricsSnapshot = Field(default_factory=TaskMetricsSnapshot)
    backpressured_ms: int = 0  # total time the task thread waited for room in its output (Flink: backPressuredTimeMs)
    backpressure_ratio: float = 0.0  # share of the interval since the previous request spent waiting, 0..1


class TaskMetricsReport(Message):
    tm_id: str
    tasks: list[TaskMetricsEntry] = Field(default_factory=list)  # attempts the TE does not run are left out


class SubtaskDetails(Message):
    subtask_index: int
    state: ExecutionState
    attempt_number: int
    attempt_id: str
    tm_id: str | None = None  # None until the subtask has a slot
    host: str | None = None
    state_timestamps_ms: dict[str, int] = Field(default_factory=dict)  # ExecutionState name -> first time in it
    metrics: TaskMetricsSnapshot = Field(default_factory=TaskMetricsSnapshot)
    backpressured_ms: int = 0
    backpressure_ratio: float = 0.0
    failure: ErrorInfo | None = None
    # speculative execution: the subtask's other attempts that ran beside this one (Flink's REST:
    # other-concurrent-attempts); each without further nesting
    other_concurrent_attempts: list["SubtaskDetails"] = Field(default_factory=list)


class VertexDetails(Message):
    vertex_id: str
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str = "default"
    subtasks: list[SubtaskDetails] = Field(default_factory=list)


class RegionDetails(Message):
    """One pipelined region of a job (its subtasks run and restart together; Flink's SchedulingPipelinedRegion)."""

    index: int  # in topological order, from 1
    state: ExecutionState  # the aggregate of its subtasks' (CREATED: waiting for its blocking inputs)
    subtasks: list[str]  # "<vertex name> (i/p)"
    blocking_inputs: int = 0  # blocking partitions it reads
    blocking_inputs_committed: int = 0


class JobDetailsMessage(Message):
    """Dispatcher -> REST: a job's status and every subtask's attempt, placement and metrics (Flink: JobDetailsInfo)."""

    job_id: str
    job_name: str
    status: JobStatus
    start_time_ms: int
    end_time_ms: int | None = None
    status_timestamps_ms: dict[str, int] = Field(default_factory=dict)  # JobStatus name -> first time in it
    vertices: list[VertexDetails] = Field(default_factory=list)
    error: ErrorInfo | None = None
    failure_time_ms: int | None = None
    regions: list[RegionDetails] = Field(default_factory=list)


class ClusterOverviewMessage(Message):
    """Job counts by status (the REST API adds TaskManagers and slots from the ResourceManager)."""

    jobs_running: int = 0  # every job not yet ended (Flink counts created/restarting ones as running too)
    jobs_finished: int = 0
    jobs_cancelled: int = 0
    jobs_failed: int = 0
