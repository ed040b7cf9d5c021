"""ResourceManager: TaskManager registration, heartbeats, slot allocation, asking the provider for more.

Flink: ResourceManager + ActiveResourceManager. One per cluster, in the JobManager process.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.core.errors import ConfigurationError
from runtime.jobmanager.resource_provider import ResourceProvider, TaskManagerSpec
from runtime.jobmanager.slot_manager import (
    Allocation,
    Clock,
    SlotManager,
    TaskManagerShape,
)
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.messages import ResourceProfile
from runtime.rpc.service import RpcEndpoint, RpcService, rpc_method

log = logging.getLogger(__name__)
STDOUT_TAIL_CHARS = 1024 * 1024  # newest stdout kept per TaskManager (REST /taskmanagers/{id}/stdout)
STDOUT_TAILS_KEPT = 64  # TaskManagers whose stdout is kept (live and recently gone)


class ResourceManagerConfig(BaseModel):
    """How the ResourceManager sizes and scales the cluster (Flink: resourcemanager.* / slotmanager.*)."""

    model_config = ConfigDict(extra="forbid")

    slots_per_tm: int = Field(1, ge=1, description="slots of a default TaskManager")
    heartbeat_interval_ms: int = Field(1000, gt=0)
    heartbeat_timeout_ms: int = Field(10000, gt=0)
    max_task_managers: int | None = Field(None, ge=0, description="never more TaskManagers than this (None: no cap)")
    tm_registration_timeout_s: float = Field(120.0, gt=0)
    task_manager_profile: ResourceProfile | None = Field(
        None, description="total resources of a default TaskManager; None: slots_per_tm x (1 CPU, 512 MB heap, 128 MB managed)"
    )
    max_task_manager_profile: ResourceProfile | None = Field(
        None, description="the largest TaskManager the cluster may start for a slot sharing group's resources; None: no bound"
    )
    initial_task_managers: int = Field(0, ge=0, description="default TaskManagers started with the ResourceManager (session mode)")
    min_task_managers: int = Field(0, ge=0, description="never release below this; lost ones are replaced")
    idle_timeout_s: float | None = Field(
        None,
        gt=0,
        description="release a TaskManager whose slots were all free this long, down to the minimum "
        "(None: never; Flink: resourcemanager.taskmanager-timeout)",
    )
    start_retry_interval_s: float = Field(
        3.0, gt=0, description="after a TaskManager failed to start, wait this long before starting another; doubled on "
        "each further failure in a row (Flink: resourcemanager.start-worker.retry-interval)"
    )
    max_start_retry_interval_s: float = Field(60.0, gt=0, description="the longest wait between failing starts")
    dynamic_slots: bool = Field(
        True, description="cut each slot from a TaskManager's free resources to exactly what its slot sharing group asks "
        "(Flink's fine-grained resource management, FLIP-156); False: every slot is the TaskManager's total / its slots",
    )
    evenly_spread_out_slots: bool = Field(
        False, description="place slots on the least used TaskManager instead of packing the first with room "
        "(Flink: cluster.evenly-spread-out-slots)",
    )
    max_total_cpu: float | None = Field(
        None, gt=0, description="never start TaskManagers beyond this many CPUs in all (Flink: slotmanager.max-total-resource.cpu)"
    )
    max_total_memory_mb: int | None = Field(
        None, gt=0, description="never start TaskManagers beyond this much task heap + off-heap + managed memory in all, in MB "
        "(Flink: slotmanager.max-total-resource.memory)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ResourceManagerConfig:
        if self.max_task_managers is not None and self.min_task_managers > self.max_task_managers:
            raise ConfigurationError(
                f"min_task_managers ({self.min_task_managers}) exceeds max_task_managers ({self.max_task_managers}): lower the minimum or raise the cap"
            )
        if self.max_task_manager_profile is not None and not self.default_task_manager_profile.fits_in(self.max_task_manager_profile):
            raise ConfigurationError(
                f"the default TaskManager ({self.default_task_manager_profile.describe()}) is larger than max_task_manager_profile "
                f"({self.max_task_manager_profile.describe()}): raise the maximum or shrink task_manager_profile / slots_per_tm"
            )
        return self

    @property
    def default_task_manager_profile(self) -> ResourceProfile:
        return self.task_manager_profile or ResourceProfile().multiply(self.slots_per_tm)


class ResourceManager(RpcEndpoint):
    def __init__(
        self, rpc: RpcService, provider: ResourceProvider, config: ResourceManagerConfig, clock: Clock = time.monotonic
    ) -> None:
        super().__init__(rpc, gw.RESOURCE_MANAGER)
        self.provider = provider
        self.config = config
        self.clock = clock
        self.resource_manager_id = uuid.uuid4().hex
        self.slot_manager = SlotManager(
            config.slots_per_tm,
            config.max_task_managers,
            task_manager_profile=config.default_task_manager_profile,
            max_task_manager_profile=config.max_task_manager_profile,
            min_task_managers=config.min_task_managers,
            idle_timeout_s=config.idle_timeout_s,
            clock=clock,
            dynamic=config.dynamic_slots,
            evenly_spread_out_slots=config.evenly_spread_out_slots,
            max_total_cpu=config.max_total_cpu,
            max_total_memory_mb=config.max_total_memory_mb,
        )
        self._tm_seq = 0
        self._lost: set[str] = set()  # declared lost or released: never accepted again under that id
        self._job_master_tokens: dict[str, str | None] = {}  # job id -> its JobMaster's fencing token
        self._stopping = False
        self._unsubscribe: Any = lambda: None
        self._heartbeat_task: asyncio.Future | None = None
        self._check_task: asyncio.Future | None = None
        # TaskManager starts that failed in a row (provider error, ended or silent before
        # registering): starts back off until `_next_start_at`, and jobs short of slots are told why
        self.start_failures = 0
        self.last_start_failure: str | None = None
        self._next_start_at = 0.0
        # what each TaskManager printed: its newest STDOUT_TAIL_CHARS (REST), and a settable listener
        # (an embedded run writes it to the client's stdout)
        self.stdout_tails: dict[str, tuple[str, bool]] = {}
        self.log_tails: dict[str, tuple[str, bool]] = {}  # the same for their log records (REST /taskmanagers/{id}/log)
        self.memory: dict[str, tuple[float | None, int | None]] = {}  # tm id -> (RSS MB, budget MB) at its last heartbeat
        self.on_task_manager_stdout: Callable[[str, str], None] | None = None
        provider.set_termination_handler(lambda tm_id, diagnostics: self.run_in_main_thread(self._worker_terminated, tm_id, diagnostics))

    async def on_start(self) -> None:
        self._unsubscribe = self.rpc.on_peer_lost(
            lambda peer, cause: self.run_in_main_thread(self._tm_lost, peer, f"connection lost ({cause})")
        )
        self._heartbeat_task = self.spawn(self._heartbeat_loop())
        self._check_task = self.spawn(self._check_loop())
        initial = self.config.initial_task_managers
        if self.config.max_task_managers is not None:
            initial = min(initial, self.config.max_task_managers)
        if initial:
            # session mode: TaskManagers up front, their slots' resources assigned when allocated
            log.info("[ResourceManager] starting %d initial TaskManagers", initial)
            for _ in range(initial):
                if self.clock() < self._next_start_at:
                    break  # failing: the periodic check starts the rest after the backoff (min_task_managers)
                self._start_task_manager(self.slot_manager.default_shape)
        self._check_resources()

    async def on_stop(self) -> None:
        self._stopping = True  # no replacements for TaskManagers released now
        self._unsubscribe()
        for task in (self._heartbeat_task, self._check_task):
            if task:
                task.cancel()  # the others are awaited by the endpoint
        for tm_id in list(self.slot_manager.task_managers) + list(self.slot_manager.pending_task_managers):
            await self._release(tm_id, "cluster shutting down")

    # --- TaskManagers -------------------------------------------------------------------------
    @rpc_method
    async def register_task_executor(self, msg: m.RegisterTaskExecutor) -> m.RegistrationResponse:
        if msg.tm_id in self._lost:
            # e.g. Spark retrying the task of a TaskManager we already declared lost and released
            log.warning("[ResourceManager] refused registration of %s: it was declared lost or released", msg.tm_id)
            return m.RegistrationResponse(accepted=False, reason=f"TaskManager {msg.tm_id} was declared lost or released; it must not come back")
        self.slot_manager.register(msg)
        self.start_failures, self._next_start_at = 0, 0.0  # starts work again: no more backoff
        log.info(
            "[ResourceManager] TaskManager %s registered: %d slots, %s in all, data %s:%d, pid %d%s",
            msg.tm_id, msg.num_slots, msg.resource_profile.describe(), msg.data_address.host, msg.data_address.port, msg.pid,
            f", Spark executor {msg.spark_executor_id}" if msg.spark_executor_id else "",
        )
        self.loop.call_soon(self._check_resources)
        return m.RegistrationResponse(
            accepted=True,
            resource_manager_id=self.resource_manager_id,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            heartbeat_timeout_ms=self.config.heartbeat_timeout_ms,
        )

    @rpc_method
    async def send_slot_report(self, msg: m.SlotReport) -> m.Ack:
        self.slot_manager.report(msg)
        self._check_resources()
        return m.Ack()

    @rpc_method
    async def list_task_managers(self, msg: m.Empty | None = None) -> m.TaskManagerList:
        now = self.clock()
        return m.TaskManagerList(
            task_managers=[
                m.TaskManagerInfo(
                    tm_id=t.tm_id,
                    host=t.registration.hostname,
                    pid=t.registration.pid,
                    data_port=t.data_address.port,
                    slots_total=t.slot_count,
                    slots_free=len(t.free_slots()),
                    heartbeat_age_ms=int((now - t.last_heartbeat) * 1000),
                    spark_executor_id=t.registration.spark_executor_id,
                    resource_profile=t.registration.resource_profile,
                    free_resources=t.free_profile,
                    allocated_resources=t.allocated_profile,
                    default_slot=self.slot_manager.slot_to_cut(None, t),
                    dynamic_slots=t.dynamic,
                    rss_mb=self.memory.get(t.tm_id, (None, None))[0],
                    memory_budget_mb=self.memory.get(t.tm_id, (None, None))[1],
                    slots=[
                        m.SlotStatus(slot_index=s.index, state=s.state, allocation_id=s.allocation_id, job_id=s.job_id, resource_profile=s.profile)
                        for s in sorted(t.slots, key=lambda s: s.index) if not s.is_free
                    ],
                )
                for t in self.slot_manager.task_managers.values()
            ]
        )

    @rpc_method
    async def task_manager_stdout(self, msg: m.TaskManagerStdout) -> m.Ack:
        tails = self.log_tails if msg.stream == "log" else self.stdout_tails
        tail, truncated = tails.get(msg.tm_id, ("", False))
        tail += msg.text
        if len(tail) > STDOUT_TAIL_CHARS:
            tail, truncated = tail[-STDOUT_TAIL_CHARS:], True
        tails[msg.tm_id] = (tail, truncated)
        if len(tails) > 4 * STDOUT_TAILS_KEPT:  # TaskManagers come and go: keep the newest
            for old in list(tails)[: len(tails) - STDOUT_TAILS_KEPT]:
                del tails[old]
        if msg.stream == "log":
            return m.Ack()
        if self.on_task_manager_stdout is not None:
            try:
                self.on_task_manager_stdout(msg.tm_id, msg.text)
            except Exception:  # noqa: BLE001 - e.g. the client's stdout is a closed pipe
                log.warning("[ResourceManager] could not write the stdout of TaskManager %s", msg.tm_id)
        return m.Ack()

    @rpc_method
    async def request_task_manager_stdout(self, msg: m.TaskManagerIdMessage) -> m.TaskManagerStdoutTail:
        tails = self.log_tails if msg.stream == "log" else self.stdout_tails
        known = msg.tm_id in self.slot_manager.task_managers or msg.tm_id in tails
        text, truncated = tails.get(msg.tm_id, ("", False))
        return m.TaskManagerStdoutTail(tm_id=msg.tm_id, known=known, text=text, truncated=truncated)

    def _tm_lost(self, tm_id: str, cause: str) -> None:
        if tm_id not in self.slot_manager.task_managers and tm_id not in self.slot_manager.pending_task_managers:
            return
        where = self.provider.describe(tm_id)
        self._lost.add(tm_id)
        self.memory.pop(tm_id, None)
        jobs = self.slot_manager.unregister(tm_id)
        log.warning("[ResourceManager] TaskManager %s (%s) lost: %s", tm_id, where, cause)
        for job_id in jobs:
            jm = self.rpc.gateway(gw.JobMasterGateway, gw.job_master_endpoint(job_id), token=self._job_master_tokens.get(job_id))
            self.spawn(self._notify_lost(jm, m.TaskManagerLost(tm_id=tm_id, cause=f"TaskManager {tm_id} ({where}) was lost: {cause}")))
        try:
            self.provider.release_task_manager(tm_id)
        except Exception:
            log.exception("[ResourceManager] provider failed to release %s", tm_id)
        self._check_resources()  # below the minimum: a replacement

    def _worker_terminated(self, tm_id: str, diagnostics: str) -> None:
        """The provider saw a TaskManager's process or Spark task end without being released."""
        if tm_id in self.slot_manager.pending_task_managers:
            diagnostics = f"it ended before registering: {diagnostics}"
            self._start_failed(tm_id, diagnostics)
        self._tm_lost(tm_id, diagnostics)

    def _start_failed(self, tm_id: str, cause: str) -> None:
        self.start_failures += 1
        self.last_start_failure = f"TaskManager {tm_id} ({self.provider.describe(tm_id)}) failed to start: {cause}"
        delay = min(self.config.start_retry_interval_s * 2 ** (self.start_failures - 1), self.config.max_start_retry_interval_s)
        self._next_start_at = self.clock() + delay
        log.error(
            "[ResourceManager] %s; next TaskManager start in %.1fs (%d failed in a row)",
            self.last_start_failure, delay, self.start_failures,
        )

    @rpc_method
    async def set_task_manager_count(self, msg: m.TaskManagerCount) -> m.Ack:
        """Run exactly this many TaskManagers (millrace cluster scale): start the missing ones, release
        the surplus (idle ones first; a busy one's jobs lose its slots: a reactive job scales down,
        another fails over). From now on it is both the minimum and the maximum."""
        n = msg.task_managers
        cap = self.config.max_task_managers  # the cluster's own bound, set when it started: scaling stays within it
        if cap is not None and n > cap:
            return m.Ack(ok=False, message=(
                f"cannot scale to {n} TaskManagers: this cluster runs at most {cap} (its max_task_managers; "
                "millrace cluster start --max-taskmanagers sets it)"
            ))
        sm = self.slot_manager
        sm.min_task_managers = n
        sm.max_task_managers = n
        registered = list(sm.task_managers.values())
        surplus = len(registered) + len(sm.pending_task_managers) - n
        for tm_id in list(sm.pending_task_managers)[: max(0, surplus)]:
            self._release_now(tm_id, f"the cluster was scaled to {n} TaskManager(s)")
            surplus -= 1
        # idle ones first, then the newest (the longest-running keep their work)
        for tmr in sorted(registered, key=lambda t: (not t.is_idle, -registered.index(t)))[: max(0, surplus)]:
            self._tm_lost(tmr.tm_id, f"the cluster was scaled to {n} TaskManager(s)")
        log.info("[ResourceManager] scaled to %d TaskManager(s) (%d registered, %d starting)", n, len(sm.task_managers), len(sm.pending_task_managers))
        self._check_resources()
        return m.Ack(message=f"scaling to {n} TaskManager(s)")

    @rpc_method
    async def resource_status(self, msg: m.Empty | None = None) -> m.ResourceStatus:
        """Why slots may be short: TaskManager starts failing in a row, and the last cause."""
        return m.ResourceStatus(
            task_managers=len(self.slot_manager.task_managers),
            pending_task_managers=len(self.slot_manager.pending_task_managers),
            free_slots=self.slot_manager.free_slots,
            start_failures=self.start_failures,
            last_start_failure=self.last_start_failure if self.start_failures else None,
        )

    async def _notify_lost(self, jm: gw.JobMasterGateway, msg: m.TaskManagerLost) -> None:
        try:
            await jm.disconnect_task_manager(msg, timeout=10)
        except Exception:  # noqa: BLE001 - the job may have ended
            pass

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        timeout = self.config.heartbeat_timeout_ms / 1000
        while True:
            await asyncio.sleep(interval)
            now = self.clock()
            for tm_id, tmr in list(self.slot_manager.task_managers.items()):
                if now - tmr.last_heartbeat > timeout:
                    self._tm_lost(tm_id, f"no heartbeat for {timeout:.0f}s")
                    continue
                self.spawn(self._heartbeat(tm_id))
            for tm_id, pending in list(self.slot_manager.pending_task_managers.items()):
                if now - pending.requested_at > self.config.tm_registration_timeout_s:
                    cause = f"it did not register within {self.config.tm_registration_timeout_s:.0f}s"
                    self._start_failed(tm_id, cause)
                    self._tm_lost(tm_id, cause)

    async def _check_loop(self) -> None:
        """Periodic re-check: idle timeouts expire, and a failed TaskManager start is retried."""
        period = self.config.heartbeat_interval_ms / 1000
        if self.config.idle_timeout_s is not None:
            period = min(period, max(0.05, self.config.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(period)
            self._check_resources()

    async def _heartbeat(self, tm_id: str) -> None:
        te = self.rpc.gateway(gw.TaskExecutorGateway, gw.TASK_EXECUTOR, peer_id=tm_id)
        try:
            hb: m.TaskExecutorHeartbeat = await te.heartbeat_from_resource_manager(
                m.HeartbeatRequest(sender=self.endpoint_id, resource_manager_id=self.resource_manager_id), timeout=5
            )
            self.slot_manager.report(hb.slot_report)
            self.memory[tm_id] = (hb.rss_mb, hb.memory_budget_mb)
        except Exception:  # noqa: BLE001 - missed heartbeats are counted by the timeout
            pass

    # --- jobs -----------------------------------------------------------------------------------
    @rpc_method
    async def declare_required_resources(self, msg: m.ResourceRequirements) -> m.Ack:
        """A job's slot requirements; refused (ok=False, with why) if the cluster could never serve them."""
        problem = self.slot_manager.capacity_problem(msg.describe_job(), msg.requirements) if msg.requirements else None
        if problem is not None:
            log.error("[ResourceManager] %s", problem)
            self.slot_manager.declare(msg.job_id, msg.job_master_endpoint, [])
            return m.Ack(ok=False, message=problem)
        self.slot_manager.declare(msg.job_id, msg.job_master_endpoint, msg.requirements, msg.job_name)
        self._job_master_tokens[msg.job_id] = msg.job_master_token
        if msg.requirements:
            log.info(
                "[ResourceManager] %s requires %s", msg.describe_job(), "; ".join(r.describe() for r in msg.requirements)
            )
        self._check_resources()
        return m.Ack()

    @rpc_method
    async def check_job_requirements(self, msg: m.ResourceRequirements) -> m.Ack:
        """Could this cluster ever serve the job (with every TaskManager it may start, all free)?"""
        problem = self.slot_manager.capacity_problem(msg.describe_job(), msg.requirements)
        return m.Ack(ok=problem is None, message=problem or "")

    def _check_resources(self) -> None:
        if self._stopping:
            return
        decision = self.slot_manager.check(may_start=self.clock() >= self._next_start_at)
        for a in decision.allocations:
            self.spawn(self._request_slot(a))
        for tm_id in decision.release:
            tmr = self.slot_manager.task_managers.get(tm_id)
            idle_s = self.clock() - tmr.idle_since if tmr is not None and tmr.idle_since is not None else 0.0
            log.info(
                "[ResourceManager] releasing TaskManager %s: idle for %.1fs (%d TaskManagers, minimum %d)",
                tm_id, idle_s, len(self.slot_manager.task_managers) + len(self.slot_manager.pending_task_managers),
                self.config.min_task_managers,
            )
            self._release_now(tm_id, f"idle for {idle_s:.1f}s")
        for shape in decision.start:
            if self.clock() < self._next_start_at:
                break  # the one before failed: back off
            self._start_task_manager(shape)

    def _start_task_manager(self, shape: TaskManagerShape) -> None:
        self._tm_seq += 1
        tm_id = f"tm-{self.resource_manager_id[:6]}-{self._tm_seq}"
        self.slot_manager.add_pending(tm_id, shape)
        spec = TaskManagerSpec(
            jm_host=self.rpc.host, jm_port=self.rpc.port, secret=self.rpc.secret, num_slots=shape.num_slots, profile=shape.profile
        )
        log.info(
            "[ResourceManager] requesting TaskManager %s from %s: %d slot(s), %s in all",
            tm_id, self.provider.name, shape.num_slots, shape.profile.describe(),
        )
        try:
            self.provider.start_task_manager(tm_id, spec)
        except Exception as e:  # noqa: BLE001 - retried by the periodic check after a backoff; jobs time out waiting and say why
            self._start_failed(tm_id, f"{type(e).__name__}: {e}")
            self.slot_manager.pending_task_managers.pop(tm_id, None)

    async def _request_slot(self, a: Allocation) -> None:
        te = self.rpc.gateway(gw.TaskExecutorGateway, gw.TASK_EXECUTOR, peer_id=a.tm_id)
        try:
            await te.request_slot(
                m.RequestSlot(
                    allocation_id=a.allocation_id, job_id=a.job_id, job_master_endpoint=a.job_master_endpoint, resource_manager_id=self.resource_manager_id,
                    job_master_token=self._job_master_tokens.get(a.job_id), resource_profile=a.profile, declared=a.declared,
                ),
                timeout=10,
            )
            self.slot_manager.confirm(a.tm_id, a.slot_index, a.allocation_id)
        except Exception as e:  # noqa: BLE001 - any failed request gives the slot back to the pool
            log.warning("[ResourceManager] slot request to %s failed: %s", a.tm_id, e)
            self.slot_manager.allocation_failed(a)

    def _release_now(self, tm_id: str, cause: str) -> None:
        """Forget the TaskManager at once (its slots are no longer offered), then tell it and the provider."""
        registered = tm_id in self.slot_manager.task_managers
        self._lost.add(tm_id)
        self.memory.pop(tm_id, None)
        self.slot_manager.unregister(tm_id)
        self.spawn(self._finish_release(tm_id, cause, registered))

    async def _finish_release(self, tm_id: str, cause: str, registered: bool) -> None:
        if registered:
            te = self.rpc.gateway(gw.TaskExecutorGateway, gw.TASK_EXECUTOR, peer_id=tm_id)
            try:
                await te.release(m.ReleaseTaskExecutor(cause=cause), timeout=3)
            except Exception:  # noqa: BLE001 - a TaskManager already gone needs no release
                pass
        try:
            self.provider.release_task_manager(tm_id)
        except Exception:
            log.exception("[ResourceManager] provider failed to release %s", tm_id)

    async def _release(self, tm_id: str, cause: str) -> None:
        registered = tm_id in self.slot_manager.task_managers
        self._lost.add(tm_id)
        self.slot_manager.unregister(tm_id)
        await self._finish_release(tm_id, cause, registered)
