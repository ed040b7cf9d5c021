"""Pydantic messages exchanged between endpoints (JobManager <-> TaskManager, client <-> Dispatcher)."""
from __future__ import annotations

import traceback as _tb
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.states import ExecutionState, JobStatus, SlotState
from runtime.rpc.deployment import DataAddress


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

    @classmethod
    def from_exception(cls, exc: BaseException, **where: Any) -> "ErrorInfo":
        return cls(
            type_name=type(exc).__name__,
            message=str(exc),
            traceback="".join(_tb.format_exception(type(exc), exc, exc.__traceback__)),
            **where,
        )

    def describe(self) -> str:
        where = []
        if self.operator:
            where.append(f"in operator '{self.operator}'")
        if self.task:
            where.append(f"in task {self.task}")
        if self.task_manager:
            where.append(f"on TaskManager {self.task_manager}")
        return f"{self.type_name}: {self.message}" + ("".join(f" {w}" for w in where) if where else "")


class ResourceProfile(Message):
    cpu_cores: float = 1.0
    task_heap_mb: int = 512
    managed_memory_mb: int = 128


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


class TaskExecutionStateUpdate(Message):
    job_id: str
    execution_attempt_id: str
    state: ExecutionState
    error: ErrorInfo | None = None
    metrics: TaskMetricsSnapshot = Field(default_factory=TaskMetricsSnapshot)


class OperatorEventMessage(Message):
    job_id: str
    execution_attempt_id: str
    node_id: int
    subtask_index: int
    attempt_number: int
    payload: bytes  # cloudpickle of the event object


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
class ResourceRequirements(Message):
    """JM -> RM: how many slots this job needs now (0 clears; Flink: declareRequiredResources)."""

    job_id: str
    job_master_endpoint: str
    slots: int


class TaskManagerLost(Message):
    tm_id: str
    cause: str


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
