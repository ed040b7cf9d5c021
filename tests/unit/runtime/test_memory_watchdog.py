"""The TaskManager memory budget: what it is made of, and the watchdog that fails tasks over it.

Driven by a fake RSS reader and a fake clock: no process grows here, nothing waits.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from runtime.core.errors import ConfigurationError
from runtime.rpc.messages import ResourceProfile
from runtime.taskmanager.interrupt import TaskInterrupter
from runtime.taskmanager.memory import (
    MemoryBudget,
    MemoryWatchdog,
    RunningTask,
    TaskManagerMemoryConfig,
    TaskManagerMemoryExceededError,
    read_rss_mb,
    start_watchdog,
)

pytestmark = pytest.mark.unit

CONFIG = TaskManagerMemoryConfig(framework_overhead_mb=200, release_grace_s=3.0)
BUDGET = MemoryBudget.of(ResourceProfile(task_heap_mb=256, managed_memory_mb=64), CONFIG)  # 520 MB


@dataclass
class FakeMemory:
    """What the process 'uses'; release() drops it to `after_release` (None: nothing is freed)."""

    rss_mb: float = 150.0
    after_release: float | None = None
    releases: int = 0

    def read(self) -> float:
        return self.rss_mb

    def release(self) -> None:
        self.releases += 1
        if self.after_release is not None:
            self.rss_mb = self.after_release


@dataclass
class FakeClock:
    now: float = 100.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeTask:
    """A running task whose fail_with records what it was sent; `accepts` False: not in its window yet."""

    name: str
    accepts: bool = True
    sent: list[type[BaseException]] = field(default_factory=list)

    def fail_with(self, exc_type: type[BaseException]) -> bool:
        if not self.accepts:
            return False
        self.sent.append(exc_type)
        return True

    def running(self) -> RunningTask:
        return RunningTask(attempt_id=f"attempt-{self.name}", name=self.name, fail_with=self.fail_with)


def _watchdog(memory: FakeMemory, clock: FakeClock) -> MemoryWatchdog:
    return MemoryWatchdog("tm-7", BUDGET, CONFIG, read_rss_mb=memory.read, clock=clock, release_memory=memory.release)


def test_budget_is_task_heap_plus_managed_plus_framework_overhead_and_grows_with_the_profile() -> None:
    assert BUDGET.total_mb == 256 + 64 + 200
    assert BUDGET.describe() == "520 MB (256 MB task heap + 64 MB managed memory + 200 MB framework overhead)"
    two_slots = MemoryBudget.of(ResourceProfile(task_heap_mb=256, managed_memory_mb=64).multiply(2), CONFIG)
    assert two_slots.total_mb == 512 + 128 + 200  # the overhead is per process, not per slot


def test_under_the_budget_nothing_fails() -> None:
    memory, clock, task = FakeMemory(rss_mb=519), FakeClock(), FakeTask("Map (1/1)#0")
    wd = _watchdog(memory, clock)
    assert wd.check([task.running()]) is None
    assert task.sent == [] and not wd.over_budget


def test_over_the_budget_every_running_task_fails_with_a_memory_error_naming_tm_budget_and_tasks() -> None:
    memory, clock = FakeMemory(rss_mb=800), FakeClock()
    hoarder, sink = FakeTask("Source: numbers -> hoarding map (1/1)#0"), FakeTask("Sink: print (1/1)#0")
    wd = _watchdog(memory, clock)

    assert wd.check([hoarder.running(), sink.running()]) is None  # fail the tasks first; the process stays
    assert wd.over_budget
    assert len(hoarder.sent) == 1 and len(sink.sent) == 1
    exc_type = hoarder.sent[0]
    error = exc_type()  # CPython instantiates an asynchronous exception with no arguments
    assert isinstance(error, MemoryError) and isinstance(error, TaskManagerMemoryExceededError)
    assert type(error).__name__ == "TaskManagerMemoryExceededError"
    text = str(error)
    assert "TaskManager tm-7" in text
    assert "800 MB resident" in text
    assert "520 MB (256 MB task heap + 64 MB managed memory + 200 MB framework overhead)" in text
    assert "hoarding map" in text and "Sink: print" in text
    assert "task heap" in text  # what to do

    wd.check([hoarder.running(), sink.running()])
    assert len(hoarder.sent) == 1 and len(sink.sent) == 1  # sent once per task


def test_a_task_not_yet_in_its_window_is_failed_at_a_later_check() -> None:
    memory, clock = FakeMemory(rss_mb=800), FakeClock()
    task = FakeTask("Map (1/1)#0", accepts=False)  # still initializing
    wd = _watchdog(memory, clock)
    wd.check([task.running()])
    assert task.sent == []
    task.accepts = True
    clock.now += 0.1
    wd.check([task.running()])
    assert len(task.sent) == 1


def test_a_task_deployed_while_over_the_budget_fails_too() -> None:
    memory, clock = FakeMemory(rss_mb=800), FakeClock()
    first, second = FakeTask("Map (1/1)#0"), FakeTask("Map (1/1)#1")
    wd = _watchdog(memory, clock)
    wd.check([first.running()])
    clock.now += 0.5
    wd.check([first.running(), second.running()])  # e.g. the restarted attempt on the same slot
    assert len(first.sent) == 1 and len(second.sent) == 1


def test_memory_freed_after_the_tasks_ended_ends_the_episode_and_the_task_manager_goes_on() -> None:
    memory, clock = FakeMemory(rss_mb=800, after_release=180), FakeClock()
    task = FakeTask("Map (1/1)#0")
    wd = _watchdog(memory, clock)
    wd.check([task.running()])
    clock.now += 0.2
    assert wd.check([]) is None  # the task ended: collect + trim, measure again
    assert memory.releases == 1
    assert not wd.over_budget  # slots are offered again
    clock.now += 10
    assert wd.check([]) is None  # no late termination


def test_memory_that_stays_over_the_budget_makes_the_task_manager_exit_after_the_grace() -> None:
    memory, clock = FakeMemory(rss_mb=800), FakeClock()  # a leak outside the task: nothing is freed
    task = FakeTask("Map (1/1)#0")
    wd = _watchdog(memory, clock)
    assert wd.check([task.running()]) is None
    clock.now += 0.2
    assert wd.check([]) is None  # released once, still over
    clock.now += 2.7
    assert wd.check([]) is None  # 2.9 s < 3 s grace
    assert memory.releases == 1
    clock.now += 0.1
    cause = wd.check([])
    assert cause is not None
    assert "800 MB resident" in cause and "520 MB" in cause and "exits" in cause


def test_a_task_that_swallows_the_error_and_keeps_the_memory_still_ends_with_the_task_manager() -> None:
    memory, clock = FakeMemory(rss_mb=800), FakeClock()
    task = FakeTask("Map (1/1)#0")  # accepts the error, then catches it and runs on
    wd = _watchdog(memory, clock)
    wd.check([task.running()])
    clock.now += 3.0
    assert wd.check([task.running()]) is not None
    assert memory.releases == 0  # never collected under a running task


def test_start_refuses_a_process_already_over_its_budget_and_skips_when_not_enforced() -> None:
    profile = ResourceProfile(task_heap_mb=16, managed_memory_mb=0)
    small = TaskManagerMemoryConfig(framework_overhead_mb=64)
    with pytest.raises(ConfigurationError) as info:
        start_watchdog("tm-1", profile, small, read_rss=lambda: 125.0)
    assert "tm-1" in str(info.value) and "125 MB" in str(info.value) and "framework_overhead_mb" in str(info.value)
    assert start_watchdog("tm-1", profile, small.model_copy(update={"enforce": False}), read_rss=lambda: 125.0) is None
    assert start_watchdog("tm-1", profile, small, read_rss=lambda: None) is None  # not measurable here
    wd = start_watchdog("tm-1", profile, TaskManagerMemoryConfig(), read_rss=lambda: 125.0)
    assert wd is not None and wd.budget.total_mb == 16 + 256


def test_this_process_resident_set_is_read() -> None:
    rss = read_rss_mb()
    assert rss is not None and 10 < rss < 100_000


def test_the_memory_error_is_raised_in_the_task_thread_through_its_interrupter() -> None:
    interrupter, caught, in_window, stop = TaskInterrupter(), [], threading.Event(), threading.Event()
    exc_type = TaskManagerMemoryExceededError.with_message("TaskManager tm-7 exceeded its memory budget: 800 MB")

    def run() -> None:
        try:
            interrupter.open_window()
            try:
                in_window.set()
                while not stop.is_set():
                    stop.wait(0.01)  # user code in short steps
            finally:
                interrupter.close_window()
        except MemoryError as e:
            caught.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert in_window.wait(5)
    assert interrupter.interrupt(exc_type) is True
    t.join(5)
    stop.set()
    assert not t.is_alive()
    assert len(caught) == 1 and isinstance(caught[0], TaskManagerMemoryExceededError)
    assert str(caught[0]) == "TaskManager tm-7 exceeded its memory budget: 800 MB"
