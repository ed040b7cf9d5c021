"""Messages of the TaskExecutorGateway: slot requests and releases, heartbeats, task cancellation and
live task metrics (Flink: TaskExecutorGateway). Task deployment descriptors are in runtime.rpc.deployment;
checkpoint triggers and notifications in runtime.rpc.messages.checkpoint."""
from __future__ import annotations

from pydantic import Field

from runtime.core.states import ExecutionState
from runtime.rpc.messages.common import Message, ResourceProfile
from runtime.rpc.messages.resource_manager import SlotReport


class HeartbeatRequest(Message):
    sender: str
    resource_manager_id: str = ""


class TaskExecutorHeartbeat(Message):
    tm_id: str
    slot_report: SlotReport
    running_tasks: int = 0
    rss_mb: float | None = None  # the process's resident memory (None: not measurable here)
    memory_budget_mb: int | None = None  # what the watchdog holds it to (None: not enforced)


class RequestSlot(Message):
    """RM -> TE: allocate a slot for a job and offer it to that job's JobMaster."""

    allocation_id: str
    job_id: str
    job_master_endpoint: str
    resource_manager_id: str
    job_master_token: str | None = None  # the JobMaster's fencing token: the slot offer carries it
    # dynamic slots: the slot to cut from the TaskManager's free resources; None: a default slot
    resource_profile: ResourceProfile | None = None
    declared: bool = False  # the profile is a slot sharing group's declared resources: its task heap is enforced


class FreeSlot(Message):
    allocation_id: str
    cause: str = ""


class ReleaseTaskExecutor(Message):
    cause: str = ""


class CancelTask(Message):
    execution_attempt_id: str


class OperatorEventToTask(Message):
    """JobMaster -> one task attempt: an event from an operator coordinator to its operator
    (Flink: TaskExecutorGateway.sendOperatorEventToTask), e.g. a split assignment."""

    job_id: str
    execution_attempt_id: str
    node_id: int
    payload: bytes  # cloudpickle of the event object


class TaskMetricsSnapshot(Message):
    records_in: int = 0
    records_out: int = 0
    bytes_in: int = 0
    bytes_out: int = 0


class TaskMetricsRequest(Message):
    """JM -> TE: current metrics of these attempts (the ones the JobMaster placed on that TaskExecutor)."""

    attempt_ids: list[str]


class TaskMetricsEntry(Message):
    attempt_id: str
    state: ExecutionState
    metrics: TaskMetricsSnapshot = Field(default_factory=TaskMetricsSnapshot)
    backpressured_ms: int = 0  # total time the task thread waited for room in its output (Flink: backPressuredTimeMs)
    backpressure_ratio: float = 0.0  # share of the interval since the previous request spent waiting, 0..1
    busy_ratio: float = 0.0  # share of that interval neither idle (waiting for input) nor backpressured (Flink: busyTimeMsPerSecond / 1000)


class TaskMetricsReport(Message):
    tm_id: str
    tasks: list[TaskMetricsEntry] = Field(default_factory=list)  # attempts the TE does not run are left out
