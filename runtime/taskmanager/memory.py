"""The TaskManager's memory budget, and the watchdog that enforces it (docs/memory.md).

Flink sizes a TaskManager's JVM from its memory model (task heap + managed + framework + JVM
overhead) and the JVM enforces it: `-Xmx` throws OutOfMemoryError in the thread that allocates.
A Python process has no such limit, so a TaskManager enforces its budget itself: a watchdog reads
the process's resident set size every `check_interval_s`; over the budget, every task running on
the TaskManager fails with `TaskManagerMemoryExceededError` (a MemoryError) raised in its thread
through the TaskInterrupter, and the JobMaster handles that like any task failure. If the memory is
not back under the budget `release_grace_s` later (something outside the failed tasks holds it),
the TaskManager process exits and the ResourceManager starts a fresh one instead of offering the
bloated one's slots again.

An address-space limit (`RLIMIT_AS`, what Spark's `spark.executor.pyspark.memory` sets) is not
used: it counts virtual memory, which for a TaskManager is mostly reservations (glibc reserves a
64 MB malloc arena per thread that allocates, plus 8 MB of stack per thread; an idle TaskManager
with 10 threads is 2 GB virtual for 127 MB resident), and its MemoryError lands in whichever thread
allocates next, the RPC or network thread as likely as the task.
"""
from __future__ import annotations

import ctypes
import functools
import gc
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, Field

from runtime.core.errors import ConfigurationError, MillraceError
from runtime.rpc.messages import ResourceProfile

log = logging.getLogger(__name__)


class TaskManagerMemoryConfig(BaseModel):
    """How a TaskManager's memory budget is made up and enforced (Flink: taskmanager.memory.*).

    The budget is the TaskManager's resource profile (task heap + managed memory, summed over its
    slots) plus `framework_overhead_mb`; it grows with the profile, so a TaskManager started for a
    slot sharing group that declared more heap gets a larger budget.
    """

    enforce: bool = Field(
        True, description="fail the tasks of a TaskManager whose resident memory exceeds its budget; False: the budget is only advertised"
    )
    framework_overhead_mb: int = Field(
        256, ge=0, description="memory of the TaskManager itself: the interpreter, imported libraries (pyarrow, deltalake), "
        "RPC and network buffers; an idle TaskManager is ~125 MB (Flink: framework heap + framework off-heap + JVM overhead)",
    )
    check_interval_s: float = Field(
        0.1, gt=0, description="how often the resident set size is read (/proc/self/statm: microseconds); a task can "
        "overshoot the budget by what it allocates in one interval",
    )
    release_grace_s: float = Field(
        3.0, ge=0, description="after the tasks failed, how long memory may stay over the budget before the TaskManager "
        "exits to be replaced",
    )
    enforce_slot_heap: bool = Field(
        True, description="also fail the tasks of a slot that hold more Python heap than the slot's task heap "
        "(fine-grained resources; estimated by walking their operators' objects, see runtime.taskmanager.heap_size)",
    )


@dataclass(frozen=True)
class MemoryBudget:
    """Total process memory of one TaskManager (Flink: taskmanager.memory.process.size)."""

    task_heap_mb: int
    managed_memory_mb: int
    framework_overhead_mb: int

    @classmethod
    def of(cls, profile: ResourceProfile, config: TaskManagerMemoryConfig) -> MemoryBudget:
        return cls(profile.task_heap_mb, profile.managed_memory_mb, config.framework_overhead_mb)

    @property
    def total_mb(self) -> int:
        return self.task_heap_mb + self.managed_memory_mb + self.framework_overhead_mb

    def describe(self) -> str:
        return (
            f"{self.total_mb} MB ({self.task_heap_mb} MB task heap + {self.managed_memory_mb} MB managed memory + "
            f"{self.framework_overhead_mb} MB framework overhead)"
        )


class TaskManagerMemoryExceededError(MillraceError, MemoryError):
    """A task failed because its TaskManager used more memory than its budget.

    CPython raises an asynchronous exception by instantiating its class with no arguments, so the
    watchdog raises a subclass made for the occasion (`with_message`) whose default message says
    which TaskManager, how much and what budget.
    """

    default_message: ClassVar[str] = "the TaskManager exceeded its memory budget"

    def __init__(self, *args: object) -> None:
        super().__init__(*(args or (self.default_message,)))

    @classmethod
    def with_message(cls, message: str) -> type[TaskManagerMemoryExceededError]:
        # same name: ErrorInfo.type_name and the traceback show TaskManagerMemoryExceededError
        return type(cls.__name__, (cls,), {"default_message": message, "__module__": cls.__module__})


_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024) if hasattr(os, "sysconf") else 4096 / (1024 * 1024)


def read_rss_mb() -> float | None:
    """This process's resident set size in MB (what the kernel's OOM killer weighs); None where unknown."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_MB
    except (OSError, ValueError, IndexError):
        return None


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(None).malloc_trim  # the symbols this process has loaded
    except (OSError, AttributeError):  # not glibc
        return None


def release_free_memory() -> None:
    """Collect reference cycles (a failed task's traceback holds its frames) and give freed heap back to the kernel.

    Without `malloc_trim` glibc keeps freed small-object arenas mapped, and the RSS of a TaskManager
    whose tasks ended would stay high although nothing uses the memory.
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@dataclass
class RunningTask:
    """A task the watchdog may fail: `fail_with` raises the error type in its thread (False: not now, try again)."""

    attempt_id: str
    name: str
    fail_with: Callable[[type[BaseException]], bool]


class MemoryWatchdog:
    """Compares the TaskManager's resident memory with its budget; `check` is called every `check_interval_s`.

    An episode starts when the RSS exceeds the budget: every running task (and any that starts while
    it lasts) fails with TaskManagerMemoryExceededError -- one heap is shared by all of them, and
    Python cannot tell whose memory it is (a JVM's OutOfMemoryError hits whichever thread allocates,
    no better). Once no task runs, garbage is collected and freed heap trimmed; under the budget
    again, the episode ends and the TaskManager goes on. Still over `release_grace_s` after it began,
    `check` returns the cause for the TaskManager to exit.
    """

    def __init__(
        self,
        tm_id: str,
        budget: MemoryBudget,
        config: TaskManagerMemoryConfig,
        read_rss_mb: Callable[[], float | None] = read_rss_mb,
        clock: Callable[[], float] = time.monotonic,
        release_memory: Callable[[], None] = release_free_memory,
    ) -> None:
        self.tm_id = tm_id
        self.budget = budget
        self.config = config
        self.read_rss_mb = read_rss_mb
        self.clock = clock
        self.release_memory = release_memory
        self.slot_heaps: SlotHeapCheck | None = None  # per-slot task heap (set by start_watchdog)
        self.over_since: float | None = None  # start of the current episode
        self.last_rss_mb: float | None = None
        self.episodes = 0
        self._failed: set[str] = set()  # attempts already sent the error in this episode
        self._released = False  # memory was collected and trimmed in this episode

    def _log(self, level: int, msg: str, *args: object) -> None:
        log.log(level, f"[TaskExecutor {self.tm_id}] memory: {msg}", *args)

    @property
    def over_budget(self) -> bool:
        return self.over_since is not None

    def check(self, running: Sequence[RunningTask]) -> str | None:
        """One look at memory. Returns why the TaskManager must exit, or None."""
        rss = self.read_rss_mb()
        if rss is None:
            return None
        self.last_rss_mb = rss
        budget = self.budget.total_mb
        if rss <= budget:
            self._end_episode(rss)
            return None
        now = self.clock()
        if self.over_since is None:
            self.over_since, self.episodes = now, self.episodes + 1
            self._log(
                logging.WARNING, "%.0f MB resident, over the budget of %s: failing %d running task(s)",
                rss, self.budget.describe(), len(running),
            )
        self._fail(running, rss)
        if not running and not self._released:
            self._released = True
            self.release_memory()
            after = self.read_rss_mb()
            if after is not None:
                rss = self.last_rss_mb = after
            if rss <= budget:
                self._end_episode(rss)
                return None
        if now - self.over_since >= self.config.release_grace_s:
            cause = (
                f"memory stayed over the budget: {rss:.0f} MB resident {now - self.over_since:.1f}s after its tasks were "
                f"failed, budget {self.budget.describe()}; the TaskManager exits to be replaced"
            )
            self._log(logging.ERROR, "%s", cause)
            return cause
        return None

    def _fail(self, running: Sequence[RunningTask], rss: float) -> None:
        pending = [t for t in running if t.attempt_id not in self._failed]
        if not pending:
            return
        names = ", ".join(t.name for t in running)
        error = TaskManagerMemoryExceededError.with_message(
            f"TaskManager {self.tm_id} exceeded its memory budget: {rss:.0f} MB resident, budget {self.budget.describe()}; "
            f"its running tasks fail ({names}). Give the slot sharing group more task heap "
            "(SlotSharingGroup.builder(...).set_task_heap_memory_mb) or the TaskManagers a larger profile, or keep less in memory "
            "(large or growing data belongs in keyed state with the RocksDB backend)"
        )
        for t in pending:
            if t.fail_with(error):
                self._failed.add(t.attempt_id)
                self._log(logging.WARNING, "failed task %s (%.0f MB resident)", t.name, rss)
            # not in its processing loop yet (or already interrupted): tried again at the next check

    def _end_episode(self, rss: float) -> None:
        if self.over_since is None:
            return
        self._log(
            logging.INFO, "back under the budget: %.0f MB resident of %d MB after %.1fs; the TaskManager goes on",
            rss, self.budget.total_mb, self.clock() - self.over_since,
        )
        self.over_since = None
        self._failed.clear()
        self._released = False


class SlotHeapExceededError(TaskManagerMemoryExceededError):
    """A task failed because its slot's tasks held more Python heap than the slot's task heap budget."""

    default_message: ClassVar[str] = "a slot exceeded its task heap budget"


@dataclass
class SlotHeap:
    """One allocated slot as the per-slot check sees it: its budget, its tasks and their operators."""

    index: int
    job_id: str | None
    budget_mb: int  # the slot profile's task heap
    tasks: list[RunningTask]
    operators: list[tuple[str, str, object]]  # (task name, operator name, operator object)


@dataclass
class SlotOverBudget:
    slot: SlotHeap
    heap_mb: float
    top_task: str
    top_operator: str
    top_operator_mb: float


class SlotHeapCheck:
    """Per-slot task heap enforcement (fine-grained resources): a slot's tasks that hold more than its
    profile's task heap fail, and only they. What a slot holds is walked from its operators
    (runtime.taskmanager.heap_size); a walk costs time in proportion to the objects held, so it runs
    only when the process has grown past its baseline by more than the smallest slot budget (no slot
    can be over before that) and no more often than keeps its cost under `max_cost_share`.
    """

    def __init__(
        self, tm_id: str, baseline_mb: float, read_rss_mb: Callable[[], float | None] = read_rss_mb,
        clock: Callable[[], float] = time.monotonic, min_interval_s: float = 0.5, max_cost_share: float = 0.05,
        walker: Callable[[], object] | None = None,
    ) -> None:
        self.tm_id = tm_id
        self.baseline_mb = baseline_mb
        self.read_rss_mb = read_rss_mb
        self.clock = clock
        self.min_interval_s = min_interval_s
        self.max_cost_share = max_cost_share
        self._walker = walker
        self._next_at = 0.0
        self.walks = 0
        self._failed: set[str] = set()  # attempts already failed

    def due(self, slots: Sequence[SlotHeap]) -> bool:
        busy = [s for s in slots if s.tasks]
        if not busy or self.clock() < self._next_at:
            return False
        rss = self.read_rss_mb()
        return rss is not None and rss - self.baseline_mb > min(s.budget_mb for s in busy)

    def measure(self, slots: Sequence[SlotHeap]) -> list[SlotOverBudget]:
        """Walk every busy slot (any thread); the slots over their budget."""
        from runtime.taskmanager.heap_size import HeapWalker

        t0 = self.clock()
        over = []
        for slot in slots:
            if not slot.tasks:
                continue
            walker = self._walker() if self._walker is not None else HeapWalker()
            per_op = [(task, name, walker.size_of(op) / (1 << 20)) for task, name, op in slot.operators]  # type: ignore[attr-defined]  # a HeapWalker
            heap_mb = sum(mb for _, _, mb in per_op)
            if heap_mb > slot.budget_mb:
                task, name, mb = max(per_op, key=lambda x: x[2])
                over.append(SlotOverBudget(slot, heap_mb, task, name, mb))
        cost = self.clock() - t0
        self.walks += 1
        self._next_at = self.clock() + max(self.min_interval_s, cost / self.max_cost_share)
        return over

    def fail(self, over: SlotOverBudget) -> None:
        slot = over.slot
        error = SlotHeapExceededError.with_message(
            f"slot {slot.index} of TaskManager {self.tm_id} (job {slot.job_id}) holds ~{over.heap_mb:.0f} MB of Python heap, over its "
            f"task heap budget of {slot.budget_mb} MB; the most is in operator '{over.top_operator}' of task {over.top_task} "
            f"(~{over.top_operator_mb:.0f} MB). Give the slot sharing group more task heap "
            "(SlotSharingGroup.builder(...).set_task_heap_memory_mb), or keep less in memory (large or growing data belongs "
            "in keyed state with the RocksDB backend, which counts as managed memory)"
        )
        for t in slot.tasks:
            if t.attempt_id not in self._failed and t.fail_with(error):
                self._failed.add(t.attempt_id)
                log.warning("[TaskExecutor %s] memory: %s", self.tm_id, error.default_message)


def start_watchdog(
    tm_id: str, profile: ResourceProfile, config: TaskManagerMemoryConfig, read_rss: Callable[[], float | None] = read_rss_mb
) -> MemoryWatchdog | None:
    """The watchdog for a TaskManager about to register; None when not enforced or not measurable here.

    Raises ConfigurationError when the process already uses more than its budget before any task:
    it could never run one (the ResourceManager retries the start with back-off and reports why).
    """
    if not config.enforce:
        return None
    budget = MemoryBudget.of(profile, config)
    rss = read_rss()
    if rss is None:
        log.warning("[TaskExecutor %s] memory: cannot read the resident set size here (no /proc): the budget %s is not enforced", tm_id, budget.describe())
        return None
    if rss >= budget.total_mb:
        raise ConfigurationError(
            f"TaskManager {tm_id} uses {rss:.0f} MB before running any task, more than its memory budget {budget.describe()}: "
            "raise framework_overhead_mb (TaskManagerMemoryConfig) or the TaskManager profile"
        )
    if rss > config.framework_overhead_mb:
        log.warning(
            "[TaskExecutor %s] memory: %.0f MB resident before any task, more than the framework overhead of %d MB: "
            "tasks get less than their task heap + managed memory; raise framework_overhead_mb",
            tm_id, rss, config.framework_overhead_mb,
        )
    log.info("[TaskExecutor %s] memory: budget %s, %.0f MB resident at start", tm_id, budget.describe(), rss)
    watchdog = MemoryWatchdog(tm_id, budget, config, read_rss_mb=read_rss)
    if config.enforce_slot_heap:
        watchdog.slot_heaps = SlotHeapCheck(tm_id, rss, read_rss)
    return watchdog
