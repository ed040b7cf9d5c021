"""Where TaskManagers come from (Flink: ResourceManagerDriver). Implementations live in runtime/deploy/."""
from __future__ import annotations

from typing import Protocol

from runtime.rpc.messages import ResourceProfile


class TaskManagerSpec:
    def __init__(self, jm_host: str, jm_port: int, secret: str, slots_per_tm: int, profile: ResourceProfile) -> None:
        self.jm_host, self.jm_port, self.secret = jm_host, jm_port, secret
        self.slots_per_tm, self.profile = slots_per_tm, profile


class ResourceProvider(Protocol):
    name: str

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
