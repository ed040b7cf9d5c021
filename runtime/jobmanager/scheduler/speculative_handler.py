"""The Scheduler's speculative execution component (Flink: SpeculativeScheduler's part on top of the
adaptive batch scheduler).

Every check interval while a batch job runs, the slow task detector names subtasks much slower than
their finished siblings; their TaskManagers are blocked for new attempts for a while and each gets
another attempt in a free slot elsewhere (more slots are declared if none is free). The first
attempt to finish becomes the subtask's current one and the others are cancelled; coordinators
drop what the losers sent (`execution_attempt_failed`), and the partition tracker commits the
winner's blocking results only. An attempt that fails while another attempt of its subtask runs on
causes no failover. Everything here runs on the JobMaster's main thread.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

from runtime.core.state_machine import StateMachine
from runtime.core.states import ExecutionState, JobStatus
from runtime.graph.execution_graph import Execution, ExecutionGraph, ExecutionVertex, ExecutionVertexID
from runtime.graph.job_graph import JobGraph
from runtime.jobmanager.scheduler.coordinators import OperatorCoordinators
from runtime.jobmanager.scheduler.partition_tracker import BlockingPartitionTracker
from runtime.jobmanager.scheduler.slot_allocator import ExecutionSlotAllocator
from runtime.jobmanager.scheduler.speculative import Blocklist, SlowTaskDetector, SpeculationPolicy, SpeculativeOptions
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc import messages as m


class SpeculativeSchedulerOperations(Protocol):
    """What the speculative handler asks of its scheduler (Flink: SchedulerOperations plus the
    speculative scheduler's view of the ExecutionGraph). Called on the main thread."""

    job_graph: JobGraph
    eg: ExecutionGraph
    clock: Callable[[], float]
    status: StateMachine[JobStatus]
    partitions: BlockingPartitionTracker | None
    allocator: ExecutionSlotAllocator
    slot_pool: SlotPool
    coordinators: OperatorCoordinators

    @property
    def finishing(self) -> bool: ...

    def log(self, level: int, msg: str, *args: Any) -> None: ...

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Any: ...

    def is_restart_pending(self, vertex_id: ExecutionVertexID) -> bool: ...

    def register_attempt(self, ev: ExecutionVertex, ex: Execution) -> None: ...

    def deploy_attempt(self, ev: ExecutionVertex, ex: Execution) -> None: ...

    def cancel_attempt(self, ev: ExecutionVertex, ex: Execution) -> None: ...

    def redeclare_slots(self) -> None: ...

    def commit_blocking_partitions(self, ev: ExecutionVertex, attempt_id: str, produced: list[m.ProducedBlockingPartition]) -> None: ...

    def set_current_slot(self, vertex_id: ExecutionVertexID, slot: PhysicalSlot) -> None: ...


def _alive(ex: Execution) -> bool:
    return not ex.state.is_terminal and ex.state is not ExecutionState.CANCELING


class SpeculativeExecutionHandler:
    def __init__(self, scheduler: SpeculativeSchedulerOperations) -> None:
        s = self.s = scheduler
        options = SpeculativeOptions.from_config(s.job_graph.config)
        # only lazily scheduled jobs (blocking exchanges) can run a subtask twice
        self.options = options if s.partitions is not None else options.model_copy(update={"enabled": False})
        self.detector = SlowTaskDetector(self.options, s.clock)
        self.blocklist = Blocklist(s.clock)
        s.allocator.is_blocked = self.blocklist.is_blocked
        self.policy = SpeculationPolicy(s.eg, s.coordinators)
        self.extra_slots = 0  # declared beyond the job's own requirement (speculative attempts, blocked slots)
        self._waiting: list[tuple[ExecutionVertex, Execution]] = []  # created, waiting for a slot
        self._not_speculated: set[str] = set()  # job vertices already logged as not eligible

    def _log(self, level: int, msg: str, *args: object) -> None:
        self.s.log(level, msg, *args)

    def start(self) -> None:
        if self.options.enabled:
            self.s.call_later(self.options.check_interval_s, self._check_slow_tasks)

    def wants_slots(self) -> bool:
        return bool(self._waiting)

    def _check_slow_tasks(self) -> None:
        """Every check interval while the job runs: slow subtasks get another attempt elsewhere."""
        s = self.s
        if s.status.state.is_terminal or s.finishing:
            return
        try:
            if s.status.state is JobStatus.RUNNING:
                self._speculate(self.detector.detect(s.eg))
                self._update_extra_slots()
        finally:
            s.call_later(self.options.check_interval_s, self._check_slow_tasks)

    def _speculate(self, slow: dict[ExecutionVertexID, list[Execution]]) -> None:
        s = self.s
        for vid, running in slow.items():
            ev = s.eg.vertex(vid)
            if s.is_restart_pending(vid):
                continue
            why = self.policy.why_not(ev)
            if why is not None:
                if ev.job_vertex.id not in self._not_speculated:
                    self._not_speculated.add(ev.job_vertex.id)
                    self._log(logging.INFO, "'%s' has slow subtasks but gets no speculative attempts: %s", ev.job_vertex.name, why)
                continue
            for ex in running:  # Flink blocks the slow node: no new attempts there for a while
                slot = ex.assigned_resource
                if isinstance(slot, PhysicalSlot) and self.options.block_slow_node_s > 0 and not self.blocklist.is_blocked(slot.tm_id):
                    self.blocklist.block(slot.tm_id, self.options.block_slow_node_s)
                    self._log(logging.WARNING, "TaskManager %s runs %s slowly: it gets no new attempts for %.0fs",
                              slot.tm_id, ev.task_name_with_subtask, self.options.block_slow_node_s)
            if sum(1 for e in ev.current_executions() if _alive(e)) >= self.options.max_concurrent_executions:
                continue
            spec = ev.add_speculative_execution()
            spec.transition_state(ExecutionState.SCHEDULED)
            s.register_attempt(ev, spec)
            self._waiting.append((ev, spec))
            self._log(logging.INFO, "%s is slow (attempt #%d): starting speculative attempt #%d",
                      ev.task_name_with_subtask, running[0].attempt_number, spec.attempt_number)
        self.try_deploy()

    def try_deploy(self) -> None:
        """Speculative attempts waiting for a slot get one on a TaskManager that is not blocked."""
        s = self.s
        if not self._waiting or s.status.state is not JobStatus.RUNNING:
            return
        waiting: list[tuple[ExecutionVertex, Execution]] = []
        for ev, spec in self._waiting:
            if spec.state is not ExecutionState.SCHEDULED or ev.execution(spec.attempt_id) is not spec:
                continue  # cancelled meanwhile (the subtask finished, or a restart)
            slot = s.allocator.allocate_speculative(ev.id, spec.attempt_id)
            if slot is None:
                waiting.append((ev, spec))
                continue
            spec.assigned_resource = slot
            self._log(logging.INFO, "deploying speculative attempt #%d of %s to TaskManager %s", spec.attempt_number, ev.task_name_with_subtask, slot.tm_id)
            s.deploy_attempt(ev, spec)
        self._waiting = waiting
        self._update_extra_slots()

    def _update_extra_slots(self) -> None:
        """Declare slots beyond the job's own while speculative attempts wait for one, or slots of
        blocked TaskManagers cannot serve new attempts (the ResourceManager brings other TaskManagers)."""
        s = self.s
        blocked = set(self.blocklist.blocked())
        extra = len(self._waiting) + sum(1 for slot in s.slot_pool.slots.values() if slot.tm_id in blocked)
        if extra != self.extra_slots and s.status.state is JobStatus.RUNNING:
            self.extra_slots = extra
            s.redeclare_slots()

    def on_attempt_ended(self, ev: ExecutionVertex, ex: Execution, msg: m.TaskExecutionStateUpdate) -> bool:
        """An attempt of a subtask with concurrent attempts ended; True if that is all there is to do.
        The first attempt to finish becomes the current one and the others are cancelled; a failed
        attempt while another still runs is dropped without a failover."""
        s = self.s
        if msg.state is not ExecutionState.FINISHED:
            return self.discard_if_concurrent(ev, ex, msg.error)
        current = ev.current_execution
        if current is not ex and current.state is ExecutionState.FINISHED:
            # finished too, but later: its output is never used (the tracker deletes its files)
            self._discard(ev, ex)
            if msg.blocking_partitions and s.partitions is not None:
                s.commit_blocking_partitions(ev, ex.attempt_id, msg.blocking_partitions)
            return True
        self._make_current(ev, ex)
        running = [e for e in ev.speculative_executions if not e.state.is_terminal]
        for loser in running:
            self._discard(ev, loser)
            s.cancel_attempt(ev, loser)
        self._log(logging.INFO, "%s: attempt #%d finished first%s", ev.task_name_with_subtask, ex.attempt_number,
                  "; cancelling " + ", ".join(f"attempt #{e.attempt_number}" for e in running) if running else "")
        return False

    def discard_if_concurrent(self, ev: ExecutionVertex, ex: Execution, error: m.ErrorInfo | None) -> bool:
        """`ex` failed or was cancelled: if another attempt of its subtask runs on (or finished), that
        one carries the subtask and nothing fails over; True if so."""
        others = [e for e in ev.current_executions() if e is not ex]
        alive = [e for e in others if _alive(e)]
        if not others or (not alive and ev.current_execution.state is not ExecutionState.FINISHED):
            return False
        if ex is ev.current_execution and alive:
            self._make_current(ev, alive[0])
        self._discard(ev, ex)
        if error is not None and ex.state is ExecutionState.FAILED:
            self._log(logging.WARNING, "%s: attempt #%d failed while attempt #%d goes on: %s",
                      ev.task_name_with_subtask, ex.attempt_number, ev.current_execution.attempt_number, error.describe())
        return True

    def _make_current(self, ev: ExecutionVertex, ex: Execution) -> None:
        previous = ev.current_execution
        ev.make_current(ex)
        if ex is not previous and isinstance(ex.assigned_resource, PhysicalSlot):
            self.s.set_current_slot(ev.id, ex.assigned_resource)
            self.s.allocator.promote(ev.id, ex.attempt_id, previous.attempt_id)

    def _discard(self, ev: ExecutionVertex, ex: Execution) -> None:
        """Coordinators of the subtask's operators drop what this attempt sent (Flink: executionAttemptFailed)."""
        self.s.coordinators.execution_attempt_failed(ev.job_vertex.id, ev.subtask_index, ex.attempt_number)

    async def await_losing_attempts(self, timeout_s: float = 30.0) -> None:
        """Before the final commit: attempts that lost have ended, so what they sent is known to be discarded."""
        s = self.s
        deadline = s.clock() + timeout_s
        while any(not e.state.is_terminal for ev in s.eg.all_vertices() for e in ev.speculative_executions):
            if s.clock() > deadline:
                self._log(logging.WARNING, "attempts that lost a speculative race have not ended after %.0fs; committing anyway", timeout_s)
                return
            await asyncio.sleep(0.02)
