"""Where TaskManagers come from (Flink: ResourceManagerDriver). Implementations live in runtime/deploy/."""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, Field

from runtime.rpc.messages import ResourceProfile


class TaskManagerSpec(BaseModel):
    """What to start: where the JobManager is, and the TaskManager's shape (Flink: TaskExecutorProcessSpec).

    `profile` is the TaskManager's total; each of its `num_slots` slots gets an equal share.
    A provider reserves what it can of it (Spark: the CPUs, as task CPUs of a stage-level profile).
    """

    jm_host: str
    jm_port: int
    secret: str = Field(repr=False)
    num_slots: int = Field(1, ge=1)
    profile: ResourceProfile = Field(default_factory=ResourceProfile)

    @property
    def slots_per_tm(self) -> int:  # the older name
        return self.num_slots


# (tm_id, diagnostics): a TaskManager the provider started has ended without being released
# (Flink: ResourceEventHandler.onWorkerTerminated). Called from any thread.
TerminationHandler = Callable[[str, str], None]


class ResourceProvider(Protocol):
    name: str

    def set_termination_handler(self, handler: TerminationHandler) -> None:
        """Report TaskManagers whose process or Spark task ended on its own (crash, start failure)."""
        ...

    def start_task_manager(self, tm_id: str, spec: TaskManagerSpec) -> None:
        """Start one TaskManager that will register under `tm_id` (asynchronous)."""
        ...

    def release_task_manager(self, tm_id: str) -> None:
        """Stop it (it was told to exit; make sure it does) and free its resources."""
        ...

    def describe(self, tm_id: str) -> str:
        """Human-readable location for error messages (pid, Spark executor, ...)."""
        ...

    def close(self) -> None: ...
