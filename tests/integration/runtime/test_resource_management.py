"""The ResourceManager with local-process TaskManagers: sharing, scaling up and down, resource profiles."""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from runtime.api.datastream import SlotSharingGroup, StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.local_provider import LocalProcessProvider
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.graph.job_graph import JobGraph
from runtime.jobmanager.dispatcher import JobSubmissionError
from runtime.jobmanager.job_master import JobMaster
from runtime.rpc import messages as m
from runtime.rpc.messages import ResourceProfile
from tests.waiting import ManualClock, wait_until

TM_LOG_LEVEL = os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING")


class RecordingProvider(LocalProcessProvider):
    """Local processes, remembering every pid (released TaskManagers leave `processes`)."""

    def __init__(self) -> None:
        super().__init__(log_level=TM_LOG_LEVEL)
        self.all_pids: list[int] = []

    def start_task_manager(self, tm_id: str, spec: Any) -> None:
        super().start_task_manager(tm_id, spec)
        self.all_pids.append(self.processes[tm_id].pid)


def _alive(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


@contextmanager
def cluster(clock: Any = time.monotonic, **config: Any) -> Iterator[MiniCluster]:
    provider = RecordingProvider()
    c = MiniCluster(MiniClusterConfig(provider="local", tm_log_level=TM_LOG_LEVEL, **config), provider=provider, clock=clock).start()
    try:
        yield c
    finally:
        c.close()
        assert not _alive(provider.all_pids), f"TaskManager processes left behind: {_alive(provider.all_pids)}"


def job(name: str, parallelism: int = 1, gate: Path | None = None, group: Any = None) -> JobGraph:
    """source -> map -> print; the map waits for `gate` to exist, so the job runs until the test opens it."""
    gate_path = str(gate) if gate is not None else None

    def wait_for_gate(x: int) -> int:
        deadline = time.monotonic() + 60
        while gate_path is not None and not os.path.exists(gate_path) and time.monotonic() < deadline:
            time.sleep(0.02)
        return x

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    mapped = env.from_collection(list(range(10))).map(wait_for_gate)
    if group is not None:
        mapped = mapped.slot_sharing_group(group)
    mapped.print()
    return env.get_job_graph(name)


def free_slots(c: MiniCluster) -> int:
    return sum(t.slots_free for t in c.task_managers())


def test_two_jobs_run_at_once_on_shared_slots_which_return_to_the_pool(tmp_path: Path) -> None:
    with cluster(initial_task_managers=2, max_task_managers=2) as c:
        c.wait_for_task_managers(2)
        gate = tmp_path / "open"
        first, second = c.submit(job("first", gate=gate)), c.submit(job("second", gate=gate))
        # both hold a slot at the same time
        wait_until(lambda: free_slots(c) == 0, timeout=30, what="both jobs hold their slot", interval=0.05)
        assert first.get_job_status() is JobStatus.RUNNING and second.get_job_status() is JobStatus.RUNNING
        gate.touch()
        assert first.wait_result_message(timeout=60).status is JobStatus.FINISHED
        assert second.wait_result_message(timeout=60).status is JobStatus.FINISHED
        wait_until(lambda: free_slots(c) == 2, timeout=10, what="the slots are free again", interval=0.05)
        # and a third job reuses them: no TaskManager beyond the first two was ever started
        assert c.submit(job("third")).wait_result_message(timeout=60).status is JobStatus.FINISHED
        assert c.resource_manager._tm_seq == 2 and len(c.task_managers()) == 2


def test_a_job_needing_more_slots_than_are_free_makes_the_resource_manager_start_more() -> None:
    with cluster(initial_task_managers=1, max_task_managers=4) as c:
        c.wait_for_task_managers(1)
        result = c.submit(job("wide", parallelism=3)).wait_result_message(timeout=60)
        assert result.status is JobStatus.FINISHED
        assert len(c.task_managers()) == 3 and c.resource_manager._tm_seq == 3


def test_idle_task_managers_are_released_after_the_timeout_and_the_minimum_stays() -> None:
    """On the ResourceManager's clock, moved by the test: kept just short of the idle timeout,
    released past it down to the minimum, and the minimum kept however long after."""
    clock = ManualClock()
    with cluster(clock, initial_task_managers=1, min_task_managers=1, max_task_managers=3, idle_timeout_s=1.0) as c:
        c.wait_for_task_managers(1)
        assert c.submit(job("wide", parallelism=3)).wait_result_message(timeout=60).status is JobStatus.FINISHED
        assert c.resource_manager._tm_seq == 3
        # every slot reported free: idle since now on the clock
        wait_until(lambda: len(c.task_managers()) == 3 and free_slots(c) == 3, timeout=20, what="three idle TaskManagers", interval=0.05)
        clock.advance(0.9, then_wait_for="_check_resources")
        assert len(c.task_managers()) == 3, "released before the idle timeout"
        clock.advance(0.2)
        wait_until(lambda: len(c.task_managers()) == 1, timeout=20, what="idle TaskManagers are released down to the minimum", interval=0.05)
        clock.advance(2.5, then_wait_for="_check_resources")  # more than twice the timeout: the minimum is kept, nothing new started
        assert len(c.task_managers()) == 1 and c.resource_manager._tm_seq == 3
        assert len(c.provider.processes) == 1


def test_a_lost_task_manager_is_replaced_to_keep_the_minimum() -> None:
    with cluster(initial_task_managers=1, min_task_managers=1) as c:
        (tm,) = c.wait_for_task_managers(1)
        os.kill(tm.pid, signal.SIGKILL)
        wait_until(lambda: [t.tm_id for t in c.task_managers()] not in ([], [tm.tm_id]), timeout=30, what="a replacement registers", interval=0.05)
        assert len(c.task_managers()) == 1
        assert c.submit(job("after-loss")).wait_result_message(timeout=60).status is JobStatus.FINISHED


def test_a_group_with_a_moderate_profile_gets_a_task_manager_of_that_shape() -> None:
    largest = ResourceProfile(cpu_cores=2, task_heap_mb=2048, managed_memory_mb=512)
    with cluster(max_task_manager_profile=largest) as c:
        heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(1.5).set_task_heap_memory_mb(1024).build()
        result = c.submit(job("heavy", parallelism=2, group=heavy)).wait_result_message(timeout=60)
        assert result.status is JobStatus.FINISHED
        profiles = sorted((t.resource_profile for t in c.task_managers()), key=lambda p: p.cpu_cores)
        shaped = ResourceProfile(cpu_cores=1.5, task_heap_mb=1024, managed_memory_mb=128)  # memory beyond the ask: the default slot's
        # the source's default group gets a default TaskManager, each 'heavy' slot one of its shape
        assert profiles == [ResourceProfile(), shaped, shaped]


def _too_big_group_job() -> JobGraph:
    huge = SlotSharingGroup.builder("huge").set_cpu_cores(64.0).set_task_heap_memory_mb(256).build()
    return job("huge", group=huge)


def test_a_group_no_task_manager_may_serve_is_refused_at_submission_with_a_clear_message() -> None:
    largest = ResourceProfile(cpu_cores=4, task_heap_mb=4096, managed_memory_mb=1024)
    with cluster(max_task_manager_profile=largest) as c:
        jg = _too_big_group_job()
        with pytest.raises(JobSubmissionError) as info:
            c.submit_job(jg)
        text = str(info.value)
        for part in (jg.job_id, "'huge'", "64 CPU", largest.describe(), "max_task_manager_profile"):
            assert part in text, f"{part!r} missing from: {text}"
        assert jg.job_id not in c.dispatcher.jobs and c.resource_manager._tm_seq == 0


def test_a_job_master_whose_group_no_task_manager_may_serve_fails_fast_with_the_message() -> None:
    """Requirements that reach the ResourceManager without the Dispatcher's check fail the job at once."""
    largest = ResourceProfile(cpu_cores=4, task_heap_mb=4096, managed_memory_mb=1024)
    with cluster(max_task_manager_profile=largest) as c:
        jg = _too_big_group_job()
        ended = threading.Event()
        results: list[m.JobResultMessage] = []

        def on_terminal(result: m.JobResultMessage) -> None:
            results.append(result)
            ended.set()

        assert c.rpc is not None
        jm = JobMaster(c.rpc, jg, on_terminal)
        jm.start()
        try:
            assert ended.wait(30), "the job did not end"
        finally:
            jm.stop()
        (result,) = results
        assert result.status is JobStatus.FAILED and result.error is not None
        assert result.error.type_name == "NoResourceAvailableError"
        # failed by the ResourceManager's refusal, not after waiting for the slot request timeout
        assert "could not get its slots within" not in result.error.message, result.error.message
        for part in (jg.job_id, "'huge'", "64 CPU", largest.describe()):
            assert part in result.error.message
        assert c.resource_manager._tm_seq == 0  # nothing was started for it


def test_a_job_needing_more_slots_than_the_cluster_can_ever_offer_is_refused_at_submission() -> None:
    with cluster(max_task_managers=2, slots_per_task_manager=1) as c:
        jg = job("too-wide", parallelism=3)
        with pytest.raises(JobSubmissionError, match="needs 3 slots.*at most 2 TaskManagers"):
            c.submit_job(jg)
        assert jg.job_id not in c.dispatcher.jobs and c.resource_manager._tm_seq == 0
        # one that fits is accepted
        assert c.submit(job("fits", parallelism=2)).wait_result_message(timeout=60).status is JobStatus.FINISHED


# --- TaskManagers that fail to start --------------------------------------------------------------
class FailingStartProvider(RecordingProvider):
    """Refuses every start (as a Spark cluster that is down would) until `healthy` is set; records
    when each start was asked for, on the ResourceManager's clock."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock
        self.attempts: list[float] = []
        self.healthy = threading.Event()

    def start_task_manager(self, tm_id: str, spec: Any) -> None:
        self.attempts.append(self.clock())
        if not self.healthy.is_set():
            raise ConnectionRefusedError("the cluster manager is unreachable")
        super().start_task_manager(tm_id, spec)


def test_failing_task_manager_starts_back_off_and_recover_once_starts_work() -> None:
    """On the ResourceManager's clock, moved by the test: each retry comes when its backoff (0.25,
    0.5, 1.0 s, then capped at 1.0 s) has passed and not a check earlier, where a retry per check
    (every 50 ms) would be many. Binary fractions, so the clock's sums are exact."""
    clock = ManualClock()
    provider = FailingStartProvider(clock)
    config = MiniClusterConfig(
        provider="local", tm_log_level=TM_LOG_LEVEL, min_task_managers=1, heartbeat_interval_ms=50,
        start_retry_interval_s=0.25, max_start_retry_interval_s=1.0,
    )
    c = MiniCluster(config, provider=provider, clock=clock).start()
    try:
        wait_until(lambda: provider.attempts, timeout=30, what="the first TaskManager start", interval=0.01)
        for backoff in (0.25, 0.5, 1.0, 1.0):
            tried = len(provider.attempts)
            clock.advance(backoff - 0.125, then_wait_for="_check_resources")
            assert len(provider.attempts) == tried, f"retried before its {backoff} s backoff: {provider.attempts}"
            clock.advance(0.125, then_wait_for="_check_resources")
            assert len(provider.attempts) == tried + 1, f"no retry once its {backoff} s backoff passed: {provider.attempts}"
        gaps = [b - a for a, b in zip(provider.attempts, provider.attempts[1:])]
        assert gaps == [0.25, 0.5, 1.0, 1.0], gaps
        rm = c.resource_manager
        assert rm.start_failures == len(provider.attempts) and "the cluster manager is unreachable" in (rm.last_start_failure or "")
        provider.healthy.set()
        clock.advance(1.0)  # the capped backoff: the next start works
        c.wait_for_task_managers(1)
        assert rm.start_failures == 0  # a registration resets the backoff
        assert c.submit(job("after-recovery")).wait_result_message(timeout=60).status is JobStatus.FINISHED
    finally:
        c.close()
        assert not _alive(provider.all_pids)


def test_a_task_manager_dying_before_it_registers_is_noticed_at_once_and_the_waiting_job_says_why() -> None:
    provider = RecordingProvider()
    provider.command = [sys.executable, "-c", "import sys; sys.exit(3)"]  # e.g. a broken Python on the executors
    config = MiniClusterConfig(
        provider="local", tm_log_level=TM_LOG_LEVEL, start_retry_interval_s=0.2, max_start_retry_interval_s=0.4,
    )
    c = MiniCluster(config, provider=provider).start()
    try:
        jg = job("starved")
        jg.config["slot.request.timeout.s"] = "4"
        result = c.submit(jg).wait_result_message(timeout=60)  # well before the 120 s registration timeout
        assert result.status is JobStatus.FAILED
        # each death counted as a failed start when the process ended, not when registration timed out
        assert c.resource_manager.start_failures >= 3
        message = result.error.message
        assert "did not register within" not in message, message
        assert "could not get its slots within 4s" in message
        assert "TaskManagers fail to start" in message and "ended before registering" in message and "exited with code 3" in message
    finally:
        c.close()
        assert not _alive(provider.all_pids)
