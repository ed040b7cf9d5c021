"""Messages of the JobMasterGateway: slot offers, task state updates, operator events and coordination
requests, TaskManager loss, and the job's views (details, exceptions) (Flink: JobMasterGateway)."""
from __future__ import annotations

from pydantic import Field, model_validator

from runtime.core.states import ExecutionState, JobStatus
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages.common import ErrorInfo, Message, ResourceProfile
from runtime.rpc.messages.task_executor import TaskMetricsSnapshot
from runtime.storage.handles import BlockingResultFile


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


class SourceReachedEndOfInput(Message):
    """Source task -> JobMaster: its input ended and it holds (execution.end-of-input.savepoint)."""

    job_id: str
    execution_attempt_id: str


class TaskManagerLost(Message):
    tm_id: str
    cause: str


class CoordinationRequest(Message):
    job_id: str
    node_id: int
    payload: bytes  # cloudpickle


class CoordinationResponse(Message):
    payload: bytes


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
    busy_ratio: float = 0.0  # share of the last metrics interval the task was busy (neither idle nor backpressured)
    failure: ErrorInfo | None = None
    # speculative execution: the subtask's other attempts that ran beside this one (Flink's REST:
    # other-concurrent-attempts); each without further nesting
    other_concurrent_attempts: list[SubtaskDetails] = Field(default_factory=list)


class VertexDetails(Message):
    vertex_id: str
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str = "default"
    subtasks: list[SubtaskDetails] = Field(default_factory=list)
    slot_profile: ResourceProfile | None = None  # its slot sharing group's requirement; None: UNKNOWN (a default slot)


class RegionDetails(Message):
    """One pipelined region of a job (its subtasks run and restart together; Flink's SchedulingPipelinedRegion)."""

    index: int  # in topological order, from 1
    state: ExecutionState  # the aggregate of its subtasks' (CREATED: waiting for its blocking inputs)
    subtasks: list[str]  # "<vertex name> (i/p)"
    blocking_inputs: int = 0  # blocking partitions it reads
    blocking_inputs_committed: int = 0


class VertexParallelismBounds(Message):
    """One vertex's resource requirement (Flink 1.18's JobResourceRequirements: a parallelism range)."""

    lower_bound: int = Field(1, ge=1)
    upper_bound: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> VertexParallelismBounds:
        if self.lower_bound > self.upper_bound:
            raise ValueError(f"lower bound {self.lower_bound} is above upper bound {self.upper_bound}")
        return self


class JobResourceRequirements(Message):
    """A job's per-vertex parallelism bounds (GET/PUT /jobs/{id}/resource-requirements)."""

    job_id: str
    requirements: dict[str, VertexParallelismBounds] = Field(default_factory=dict)  # job vertex id -> bounds
    scheduler: str = "default"


class RescaleEvent(Message):
    """One change of a running job's parallelism (the adaptive scheduler's rescale history)."""

    timestamp_ms: int
    from_parallelism: dict[str, int]  # job vertex name -> parallelism
    to_parallelism: dict[str, int]
    cause: str  # e.g. "slots appeared (4 available)", "TaskManager tm-2 lost", "resource requirements changed"
    downtime_ms: int | None = None  # trigger -> every task RUNNING at the new parallelism


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
    scheduler: str = "default"  # jobmanager.scheduler: default | adaptive (reactive: adaptive with every slot)
    scheduler_state: str | None = None  # the adaptive scheduler's state (Executing, Restarting, ...)
    rescales: list[RescaleEvent] = Field(default_factory=list)
