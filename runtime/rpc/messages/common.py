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
    """Resources of a TaskManager (its total) or of one slot (Flink: ResourceProfile).

    A requirement with no profile is Flink's UNKNOWN profile: served by a default slot (see
    `ResourceRequirement.profile`). Memory in MB: task heap (what the slot's tasks may hold, checked
    by the TaskManager's memory watchdog), task off-heap (native buffers outside Python's heap, e.g.
    pyarrow's), managed (state backends: RocksDB).
    """

    cpu_cores: float = Field(1.0, ge=0)
    task_heap_mb: int = Field(512, ge=0)
    managed_memory_mb: int = Field(128, ge=0)
    task_off_heap_mb: int = Field(0, ge=0)

    @staticmethod
    def zero() -> ResourceProfile:
        return ResourceProfile(cpu_cores=0, task_heap_mb=0, managed_memory_mb=0, task_off_heap_mb=0)

    def _dims(self) -> tuple[float, int, int, int]:
        return (self.cpu_cores, self.task_heap_mb, self.managed_memory_mb, self.task_off_heap_mb)

    @staticmethod
    def _of(dims: tuple[float, float, float, float]) -> ResourceProfile:
        cpu, heap, managed, off_heap = dims
        return ResourceProfile(cpu_cores=cpu, task_heap_mb=int(heap), managed_memory_mb=int(managed), task_off_heap_mb=int(off_heap))

    def fits_in(self, other: ResourceProfile) -> bool:
        """True when `other` has at least this much of every resource (a slot `other` can serve this)."""
        return (
            self.cpu_cores <= other.cpu_cores + _CPU_EPSILON
            and self.task_heap_mb <= other.task_heap_mb
            and self.managed_memory_mb <= other.managed_memory_mb
            and self.task_off_heap_mb <= other.task_off_heap_mb
        )

    def divide(self, n: int) -> ResourceProfile:
        """One of `n` equal slots of a TaskManager with this total (memory rounds down, as Flink's)."""
        if n < 1:
            raise ValueError(f"cannot divide a resource profile into {n} slots")
        return ResourceProfile(
            cpu_cores=self.cpu_cores / n, task_heap_mb=self.task_heap_mb // n, managed_memory_mb=self.managed_memory_mb // n,
            task_off_heap_mb=self.task_off_heap_mb // n,
        )

    def multiply(self, n: int) -> ResourceProfile:
        return self._of(tuple(x * n for x in self._dims()))  # type: ignore[arg-type]  # four numbers

    def merge(self, other: ResourceProfile) -> ResourceProfile:
        """The sum of both (Flink: ResourceProfile.merge)."""
        return self._of(tuple(a + b for a, b in zip(self._dims(), other._dims())))  # type: ignore[arg-type]  # four numbers

    def subtract(self, other: ResourceProfile) -> ResourceProfile:
        """What is left of this after `other` (never below zero; CPU shares are floats)."""
        left = tuple(max(0, a - b) for a, b in zip(self._dims(), other._dims()))
        return self._of((left[0] if left[0] > _CPU_EPSILON else 0.0, *left[1:]))  # type: ignore[arg-type]  # four numbers

    def count_of(self, unit: ResourceProfile) -> int:
        """How many slots of `unit` fit into this (Flink: ResourceProfile.getMaxNumberOfSlots... of a default slot)."""
        counts = [int((a + (_CPU_EPSILON if i == 0 else 0)) // b) for i, (a, b) in enumerate(zip(self._dims(), unit._dims())) if b > 0]
        return min(counts) if counts else 1 << 30

    def max_with(self, other: ResourceProfile) -> ResourceProfile:
        return self._of(tuple(max(a, b) for a, b in zip(self._dims(), other._dims())))  # type: ignore[arg-type]  # four numbers

    def min_with(self, other: ResourceProfile) -> ResourceProfile:
        return self._of(tuple(min(a, b) for a, b in zip(self._dims(), other._dims())))  # type: ignore[arg-type]  # four numbers

    def sort_key(self) -> tuple[float, int, int, int]:
        """Smallest first: best-fit matching hands out the smallest slot that fits."""
        return (self.cpu_cores, self.task_heap_mb, self.managed_memory_mb, self.task_off_heap_mb)

    def describe(self) -> str:
        off_heap = f", {self.task_off_heap_mb} MB task off-heap" if self.task_off_heap_mb else ""
        return f"{self.cpu_cores:g} CPU, {self.task_heap_mb} MB task heap{off_heap}, {self.managed_memory_mb} MB managed memory"
