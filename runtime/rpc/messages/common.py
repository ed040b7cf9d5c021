"""What every protocol shares: the message base, acknowledgements, errors as they cross processes, and
resource profiles (Flink: Acknowledge, SerializedThrowable/ErrorInfo, ResourceProfile)."""
from __future__ import annotations

import traceback as _tb
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.errors import ThrowableType, throwable_type_of


class Message(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", extra="forbid")


class Ack(Message):
    ok: bool = True
    message: str = ""


class Empty(Message):
    pass


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
    # only an echo of another failure (a failed producer, a released partition, a cancelled task,
    # the tasks of a lost TaskManager): the exception history prefers the cause it echoes
    consequence: bool = False
    # the partition a consumer could not read (Flink: PartitionException's partition id): its
    # producer must produce it again
    partition_id: str | None = None

    @classmethod
    def from_exception(cls, exc: BaseException, **where: Any) -> ErrorInfo:
        partition_id = getattr(exc, "partition_id", None)
        fields: dict[str, Any] = {
            "consequence": bool(getattr(exc, "consequence", False)),
            "partition_id": partition_id if isinstance(partition_id, str) else None,
            **where,
        }
        return cls(
            type_name=type(exc).__name__,
            message=str(exc),
            traceback="".join(_tb.format_exception(type(exc), exc, exc.__traceback__)),
            throwable_type=throwable_type_of(exc),
            **fields,
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
