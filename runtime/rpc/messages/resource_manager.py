"""Messages of the ResourceManagerGateway: TaskExecutor registration and slot reports, the jobs'
resource requirements, TaskManager listings and stdout (Flink: ResourceManagerGateway)."""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from runtime.core.states import SlotState
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages.common import Message, ResourceProfile


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
    resource_profile: ResourceProfile | None = None  # the slot's resources (None: a default slot)


class SlotReport(Message):
    tm_id: str
    slots: list[SlotStatus]


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
    # reactive mode: the slots above `least` are taken only from free slots, no TaskManager is started for them
    elastic: bool = False

    @property
    def least(self) -> int:
        return self.count if self.min_count is None else min(self.min_count, self.count)

    def describe(self) -> str:
        what = self.profile.describe() if self.profile is not None else "any resources"
        at_least = f" (at least {self.least})" if self.least < self.count else ""
        return f"{self.count} slot(s){at_least} of {what} for slot sharing group '{self.slot_sharing_group}'"


class TaskManagerCount(Message):
    """How many default TaskManagers the cluster should run (millrace cluster scale; reactive mode follows)."""

    task_managers: int = Field(ge=0, le=10_000)


class ResourceRequirements(Message):
    """JM -> RM: what this job needs now, per slot sharing group and profile (an empty list clears).

    Flink: declareRequiredResources with a ResourceCounter. `slots=n` is accepted as n slots of the
    UNKNOWN profile (what a job without fine-grained resources needs).
    """

    job_id: str
    job_master_endpoint: str
    job_name: str = ""
    requirements: list[ResourceRequirement] = Field(default_factory=list)
    job_master_token: str | None = Field(None, description="the JobMaster's fencing token (the leader session id with HA): calls to it carry it")

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


class TaskManagerStdout(Message):
    """TM -> RM: what the TaskManager's tasks printed, in order (Flink: the TaskManager's .out file)."""

    tm_id: str
    text: str
    stream: Literal["stdout", "log"] = "stdout"  # log: its log records (Flink: the TaskManager's .log file)


class TaskManagerIdMessage(Message):
    tm_id: str
    stream: Literal["stdout", "log"] = "stdout"  # for request_task_manager_stdout: which tail


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
    # Flink's /taskmanagers/{id}: totalResource, freeResource, allocatedSlots
    free_resources: ResourceProfile | None = None
    allocated_resources: ResourceProfile | None = None
    default_slot: ResourceProfile | None = None
    dynamic_slots: bool = False
    slots: list[SlotStatus] = Field(default_factory=list)
    rss_mb: float | None = None  # resident memory at the last heartbeat
    memory_budget_mb: int | None = None


class TaskManagerList(Message):
    task_managers: list[TaskManagerInfo]
