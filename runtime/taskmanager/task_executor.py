"""TaskExecutor: the TaskManager's endpoint. Owns the slot table and the tasks (Flink: TaskExecutor)."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from typing import Any

import cloudpickle

from runtime.core.errors import MillraceError
from runtime.core.options import task as task_options
from runtime.core.states import SlotState
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.deployment import TaskDeploymentDescriptor
from runtime.rpc.ordered_sender import OrderedSender
from runtime.rpc.service import RpcEndpoint, RpcService, rpc_method, sync
from runtime.taskmanager.memory import MemoryWatchdog, RunningTask, SlotHeap, read_rss_mb
from runtime.taskmanager.task import Task
from runtime.taskmanager.task_slot_table import TaskSlotTable

log = logging.getLogger(__name__)

# the option keys and defaults under their old names (declared in runtime.core.options.task)
CANCEL_TIMEOUT_KEY = task_options.TASK_CANCELLATION_TIMEOUT.key
DEFAULT_CANCEL_TIMEOUT_S = task_options.DEFAULT_CANCEL_TIMEOUT_S
CANCEL_INTERVAL_KEY = task_options.TASK_CANCELLATION_INTERVAL.key
DEFAULT_CANCEL_INTERVAL_S = task_options.DEFAULT_CANCEL_INTERVAL_S  # grace for a cancelled task to stop by itself before its thread is interrupted


class TaskExecutor(RpcEndpoint):
    def __init__(
        self,
        rpc: RpcService,
        tm_id: str,
        jm_peer_id: str,
        network: Any,
        num_slots: int = 1,
        resource_profile: m.ResourceProfile | None = None,
        spark_executor_id: str | None = None,
        registration_timeout_s: float = 30.0,
    ) -> None:
        super().__init__(rpc, gw.TASK_EXECUTOR)
        self.tm_id = tm_id
        self.jm_peer_id = jm_peer_id
        self.network = network
        self.resource_profile = resource_profile or m.ResourceProfile()  # the TaskManager's total
        self.slot_table = TaskSlotTable(num_slots, tm_id, self.resource_profile)
        self.slot_profile = self.slot_table.default_profile  # a default slot: the total's equal share
        self.spark_executor_id = spark_executor_id
        self.registration_timeout_s = registration_timeout_s
        self.tasks: dict[str, Task] = {}
        self.stdout: Any = None  # the StdoutForwarder when this TaskManager forwards what tasks print
        self.task_start_delay_s = 0.0  # testing: a slow TaskManager (TaskManagerConfig.testing_task_delay_s)
        self._attempts_by_allocation: dict[str, list[str]] = {}
        self.terminated = threading.Event()
        self.termination_cause = ""
        self.fatal = False  # the process must go: a task could not be stopped, or memory stayed over budget
        self.memory_watchdog: MemoryWatchdog | None = None  # set by the runner: enforces the memory budget
        self._last_heartbeat = time.monotonic()
        self._heartbeat_timeout_s = 10.0
        self._heartbeat_interval_s = 1.0
        self._rm = rpc.gateway(gw.ResourceManagerGateway, gw.RESOURCE_MANAGER, peer_id=jm_peer_id)
        self._monitor: asyncio.Future | None = None

    def _log(self, msg: str, *args: Any, level: int = logging.INFO) -> None:
        log.log(level, f"[TaskExecutor {self.tm_id}] {msg}", *args)

    async def on_start(self) -> None:
        self._unsubscribe = self.rpc.on_peer_lost(self._on_peer_lost)
        self.spawn(self._register_then_monitor())

    async def _register_then_monitor(self) -> None:
        await self._register()
        if not self.terminated.is_set():
            self._monitor = self.spawn(self._monitor_heartbeats())
            if self.memory_watchdog is not None:
                self.spawn(self._watch_memory(self.memory_watchdog))

    async def _register(self) -> None:
        """Register at the ResourceManager, retrying with exponential back-off (Flink: RetryingRegistration)."""
        deadline = time.monotonic() + self.registration_timeout_s
        delay = 0.1
        msg = m.RegisterTaskExecutor(
            tm_id=self.tm_id,
            data_address=self.network.address,
            num_slots=self.slot_table.num_slots,
            resource_profile=self.resource_profile,
            pid=os.getpid(),
            hostname=socket.gethostname(),
            spark_executor_id=self.spark_executor_id,
        )
        while True:
            try:
                resp: m.RegistrationResponse = await self._rm.register_task_executor(msg, timeout=10)
                if resp.accepted:
                    self._heartbeat_interval_s = resp.heartbeat_interval_ms / 1000
                    self._heartbeat_timeout_s = resp.heartbeat_timeout_ms / 1000
                    self._last_heartbeat = time.monotonic()
                    self._log("registered at ResourceManager %s", resp.resource_manager_id)
                    return
                self.terminate(f"registration refused by the ResourceManager: {resp.reason}")
                return
            except Exception as e:  # noqa: BLE001 - retry until the deadline
                self._log("registration attempt failed: %s", e, level=logging.WARNING)
            if time.monotonic() > deadline:
                self.terminate(f"could not register at the ResourceManager within {self.registration_timeout_s}s")
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    async def _monitor_heartbeats(self) -> None:
        while not self.terminated.is_set():
            await asyncio.sleep(self._heartbeat_interval_s)
            if time.monotonic() - self._last_heartbeat > self._heartbeat_timeout_s:
                self.terminate(f"no heartbeat from the ResourceManager for {self._heartbeat_timeout_s}s")

    async def _watch_memory(self, watchdog: MemoryWatchdog) -> None:
        while not self.terminated.is_set():
            await asyncio.sleep(watchdog.config.check_interval_s)
            running = [RunningTask(t.attempt_id, t.tdd.task_name_with_subtask, t.fail_with) for t in self.tasks.values()]
            cause = watchdog.check(running)
            if cause is not None:
                self.fatal = True  # only the process's end gives the memory back (also in a reused Spark worker)
                self.terminate(cause)
            check = watchdog.slot_heaps
            if check is not None and not watchdog.over_budget:
                slots = self._slot_heaps()
                if check.due(slots):
                    # the walk holds the GIL in steps: off the event loop, so RPCs and heartbeats go on
                    for over in await asyncio.to_thread(check.measure, slots):
                        check.fail(over)

    def _slot_heaps(self) -> list[SlotHeap]:
        """The slots of groups that declared resources, their task heap budgets and what runs in them
        (for the per-slot check; a default slot's share was never asked for: the TaskManager's total holds)."""
        out = []
        for slot in self.slot_table.slots:
            tasks = [self.tasks[a] for a in slot.tasks if a in self.tasks] if slot.declared else []
            if not tasks:
                continue
            out.append(SlotHeap(
                slot.index, slot.job_id, slot.profile.task_heap_mb,
                [RunningTask(t.attempt_id, t.tdd.task_name_with_subtask, t.fail_with) for t in tasks],
                [(t.tdd.task_name_with_subtask, name, op) for t in tasks for name, op in t.operator_objects()],
            ))
        return out

    async def on_stop(self) -> None:
        self._unsubscribe()

    def _on_peer_lost(self, peer_id: str, cause: str) -> None:
        if peer_id == self.jm_peer_id:
            self.terminate(f"lost the JobManager connection ({cause})")

    def terminate(self, cause: str) -> None:
        """Cancel every task and let the runner exit."""
        if self.terminated.is_set():
            return
        self.termination_cause = cause
        self._log("terminating: %s", cause)
        for t in list(self.tasks.values()):
            t.cancel()
        self.terminated.set()

    def _cancel(self, task: Task) -> None:
        """Cancel a task and arm the watchdog (Flink: TaskCancelerWatchDog)."""
        task.cancel()
        timeout = task.settings.cancellation_timeout_s
        interval = task.settings.cancellation_interval_s
        self.loop.call_later(min(interval, timeout), self._interrupt_if_running, task, interval)
        self.loop.call_later(timeout, self._check_cancelled, task, timeout)

    def _interrupt_if_running(self, task: Task, interval: float) -> None:
        """Flink's TaskInterrupter: a task still running `interval` after cancel gets an exception in its thread."""
        if task.attempt_id in self.tasks and task.thread.is_alive() and task.interrupt():
            task.log.info("still running %.1fs after being cancelled: interrupted its thread", interval)

    def _check_cancelled(self, task: Task, timeout: float) -> None:
        if task.attempt_id in self.tasks and task.thread.is_alive():
            # the thread is stuck in user code and Python cannot kill a thread: give up the
            # process, so the JobManager sees a lost TaskManager and the job can end
            self.fatal = True
            self.terminate(
                f"task {task.tdd.task_name_with_subtask} did not stop within {timeout:.0f}s of being cancelled "
                "(stuck in user code?); the TaskManager exits"
            )

    # --- RPCs from the ResourceManager ------------------------------------------------------
    @rpc_method
    async def heartbeat_from_resource_manager(self, msg: m.HeartbeatRequest) -> m.TaskExecutorHeartbeat:
        self._last_heartbeat = time.monotonic()
        return m.TaskExecutorHeartbeat(
            tm_id=self.tm_id,
            slot_report=m.SlotReport(tm_id=self.tm_id, slots=self.slot_table.report()),
            running_tasks=len(self.tasks),
            rss_mb=read_rss_mb(),
            memory_budget_mb=self.memory_watchdog.budget.total_mb if self.memory_watchdog is not None else None,
        )

    @rpc_method
    async def heartbeat_from_job_manager(self, msg: m.HeartbeatRequest) -> m.Ack:
        self._last_heartbeat = time.monotonic()
        return m.Ack()

    @rpc_method
    async def request_slot(self, msg: m.RequestSlot) -> m.Ack:
        if self.memory_watchdog is not None and self.memory_watchdog.over_budget:
            # the ResourceManager asks another TaskManager (or this one again once it recovered or was replaced)
            raise MillraceError(
                f"TaskManager {self.tm_id} is over its memory budget ({self.memory_watchdog.last_rss_mb:.0f} MB of "
                f"{self.memory_watchdog.budget.total_mb} MB): it offers no slot until its memory is back under it"
            )
        slot = self.slot_table.allocate(msg.allocation_id, msg.job_id, msg.resource_profile, msg.declared)
        self._log(
            "slot %d (%s) allocated to job %s (allocation %s)", slot.index, slot.profile.describe(), msg.job_id, msg.allocation_id,
        )
        self.spawn(self._offer_slot(msg, slot.index, slot.profile))
        return m.Ack()

    async def _offer_slot(self, msg: m.RequestSlot, slot_index: int, profile: m.ResourceProfile) -> None:
        jm = self.rpc.gateway(gw.JobMasterGateway, msg.job_master_endpoint, peer_id=self.jm_peer_id, token=msg.job_master_token)
        offer = m.OfferSlots(
            tm_id=self.tm_id,
            data_address=self.network.address,
            job_id=msg.job_id,
            offers=[m.SlotOffer(allocation_id=msg.allocation_id, slot_index=slot_index, resource_profile=profile)],
        )
        try:
            accepted: m.AcceptedSlots = await jm.offer_slots(offer, timeout=10)
            if msg.allocation_id not in accepted.allocation_ids:
                await self._free(msg.allocation_id, "offer rejected by the JobMaster")
        except Exception as e:  # noqa: BLE001 - the JobMaster may be gone already
            self._log("slot offer to job %s failed: %s", msg.job_id, e, level=logging.WARNING)
            await self._free(msg.allocation_id, f"offer failed: {e}")

    @rpc_method
    async def free_slot(self, msg: m.FreeSlot) -> m.Ack:
        await self._free(msg.allocation_id, msg.cause)
        return m.Ack()

    async def _free(self, allocation_id: str, cause: str) -> None:
        slot = self.slot_table.start_release(allocation_id)
        if slot is None:
            return
        for attempt in list(slot.tasks):
            t = self.tasks.get(attempt)
            if t is not None:
                self._cancel(t)
        self._maybe_finish_release(slot)

    def _release_partitions(self, attempt_ids: list[str]) -> None:
        for attempt in attempt_ids:
            try:
                self.network.release_partitions_of(attempt)
            except Exception:
                log.debug("release of partitions of %s failed", attempt, exc_info=True)

    def _maybe_finish_release(self, slot: Any) -> None:
        if slot.state is SlotState.RELEASING and not slot.tasks:
            self._release_partitions(self._attempts_by_allocation.pop(slot.allocation_id, []))
            self.slot_table.finish_release(slot)
            report = m.SlotReport(tm_id=self.tm_id, slots=self.slot_table.report())
            self.spawn(self._send_slot_report(report))

    async def _send_slot_report(self, report: m.SlotReport) -> None:
        try:
            await self._rm.send_slot_report(report, timeout=10)
        except Exception as e:  # noqa: BLE001 - the next heartbeat carries it too
            self._log("slot report failed: %s", e, level=logging.DEBUG)

    @rpc_method
    async def release(self, msg: m.ReleaseTaskExecutor) -> m.Ack:
        self.loop.call_later(0.05, self.terminate, f"released by the ResourceManager: {msg.cause}")
        return m.Ack()

    # --- RPCs from JobMasters ----------------------------------------------------------------
    @rpc_method
    async def submit_task(self, tdd: TaskDeploymentDescriptor) -> m.Ack:
        self.slot_table.add_task(tdd.allocation_id, tdd.job_id, tdd.execution_attempt_id)
        jm = self.rpc.gateway(gw.JobMasterGateway, gw.job_master_endpoint(tdd.job_id), peer_id=self.jm_peer_id, token=tdd.job_master_token)
        # operator events go out in order without the task waiting for each (Flink's OperatorEventGateway)
        events = OrderedSender(lambda method, msg: jm.invoke(method, msg, timeout=60))

        def report(update: m.TaskExecutionStateUpdate) -> None:
            # a lost terminal report would leave the JobMaster waiting for this attempt: retry it
            attempts = 4 if update.state.is_terminal else 1
            if update.state.is_terminal:
                if self.stdout is not None:
                    self.stdout.forward(10.0)  # what the task printed reaches the JobManager before its end
                with contextlib.suppress(Exception):  # its events before its end (FINISHED flushed already, raising)
                    events.flush()
            for i in range(attempts):
                try:
                    sync(jm.update_task_execution_state(update, timeout=30))
                    return
                except Exception:
                    if i == attempts - 1 or self.terminated.is_set():
                        raise
                    time.sleep(0.5 * 2**i)

        def send_event(event: m.OperatorEventMessage | m.SourceReachedEndOfInput) -> None:
            method = "send_operator_event" if isinstance(event, m.OperatorEventMessage) else "source_reached_end_of_input"
            events.send(method, event)

        def checkpoint_response(msg: m.AcknowledgeCheckpoint | m.DeclineCheckpoint) -> None:
            if isinstance(msg, m.AcknowledgeCheckpoint):
                events.flush()  # a checkpoint completes only with the events sent before it (committables)
                sync(jm.acknowledge_checkpoint(msg, timeout=60))
            else:
                sync(jm.decline_checkpoint(msg, timeout=60))

        task = Task(tdd, self.network, self.tm_id, report, send_event, self._task_terminal, checkpoint_response)
        task.flush_operator_events = events.flush
        task.start_delay_s = self.task_start_delay_s
        self.tasks[tdd.execution_attempt_id] = task
        self._attempts_by_allocation.setdefault(tdd.allocation_id, []).append(tdd.execution_attempt_id)
        task.start()
        return m.Ack()

    def _task_terminal(self, task: Task) -> None:
        """Called on the task thread when it ends; bookkeeping moves to the main thread."""

        def _cleanup() -> None:
            self.tasks.pop(task.attempt_id, None)
            self.slot_table.remove_task(task.attempt_id)
            if task.state.name != "FINISHED":
                # a finished producer's pipelined partitions live on until consumed or the slot is freed
                self._release_partitions([task.attempt_id])
            slot = self.slot_table.by_allocation(task.tdd.allocation_id)
            if slot is not None:
                self._maybe_finish_release(slot)

        self.run_in_main_thread(_cleanup)

    @rpc_method
    async def cancel_task(self, msg: m.CancelTask) -> m.Ack:
        task = self.tasks.get(msg.execution_attempt_id)
        if task is None:
            return m.Ack(ok=False, message=f"no task with attempt {msg.execution_attempt_id} on {self.tm_id}")
        self._cancel(task)
        return m.Ack()

    @rpc_method
    async def trigger_checkpoint(self, msg: m.TriggerCheckpoint) -> m.Ack:
        """A source task injects barrier n (Flink: TaskExecutor.triggerCheckpoint); the task thread does the work."""
        task = self.tasks.get(msg.execution_attempt_id)
        if task is None:
            return m.Ack(ok=False, message=f"no task with attempt {msg.execution_attempt_id} on {self.tm_id}")
        return m.Ack(ok=task.trigger_checkpoint(msg.checkpoint_id, msg.timestamp_ms, msg.mode, msg.savepoint))

    @rpc_method
    async def notify_checkpoint(self, msg: m.NotifyCheckpoint) -> m.Ack:
        task = self.tasks.get(msg.execution_attempt_id)
        if task is not None:
            task.notify_checkpoint(msg.checkpoint_id, msg.completed)
        return m.Ack()

    @rpc_method
    async def send_operator_event_to_task(self, msg: m.OperatorEventToTask) -> m.Ack:
        """An operator coordinator's event for one operator of a task attempt; the task thread hands it over."""
        task = self.tasks.get(msg.execution_attempt_id)
        if task is None:
            return m.Ack(ok=False, message=f"no task with attempt {msg.execution_attempt_id} on {self.tm_id}")
        return m.Ack(ok=task.deliver_operator_event(msg.node_id, cloudpickle.loads(msg.payload)))

    @rpc_method
    async def request_task_metrics(self, msg: m.TaskMetricsRequest) -> m.TaskMetricsReport:
        """Live metrics of running attempts, for the JobMaster's job details (attempts not here are left out)."""
        entries = []
        for attempt_id in msg.attempt_ids:
            task = self.tasks.get(attempt_id)
            if task is None:
                continue
            backpressured_ms, ratio = task.backpressure_sample()
            entries.append(
                m.TaskMetricsEntry(
                    attempt_id=attempt_id, state=task.state, metrics=task.metrics_snapshot(),
                    backpressured_ms=backpressured_ms, backpressure_ratio=ratio, busy_ratio=task.busy_sample(),
                )
            )
        return m.TaskMetricsReport(tm_id=self.tm_id, tasks=entries)
