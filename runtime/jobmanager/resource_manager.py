"""ResourceManager: TaskManager registration, heartbeats, slot allocation, asking the provider for more.

Flink: ResourceManager + ActiveResourceManager. One per cluster, in the JobManager process.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any

from runtime.jobmanager.resource_provider import ResourceProvider, TaskManagerSpec
from runtime.jobmanager.slot_manager import SlotManager
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.service import RpcEndpoint, RpcService, rpc_method

log = logging.getLogger(__name__)


class ResourceManagerConfig:
    def __init__(
        self,
        slots_per_tm: int = 1,
        heartbeat_interval_ms: int = 1000,
        heartbeat_timeout_ms: int = 10000,
        max_task_managers: int | None = None,
        tm_registration_timeout_s: float = 120.0,
        profile: m.ResourceProfile | None = None,
    ) -> None:
        self.slots_per_tm = slots_per_tm
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.heartbeat_timeout_ms = heartbeat_timeout_ms
        self.max_task_managers = max_task_managers
        self.tm_registration_timeout_s = tm_registration_timeout_s
        self.profile = profile or m.ResourceProfile()


class ResourceManager(RpcEndpoint):
    def __init__(self, rpc: RpcService, provider: ResourceProvider, config: ResourceManagerConfig) -> None:
        super().__init__(rpc, gw.RESOURCE_MANAGER)
        self.provider = provider
        self.config = config
        self.resource_manager_id = uuid.uuid4().hex
        self.slot_manager = SlotManager(config.slots_per_tm, config.max_task_managers)
        self._tm_seq = 0
        self._lost: set[str] = set()
        self._unsubscribe: Any = lambda: None
        self._heartbeat_task: asyncio.Future | None = None

    async def on_start(self) -> None:
        self._unsubscribe = self.rpc.on_peer_lost(
            lambda peer, cause: self.run_in_main_thread(self._tm_lost, peer, f"connection lost ({cause})")
        )
        self._heartbeat_task = self.spawn(self._heartbeat_loop())

    async def on_stop(self) -> None:
        self._unsubscribe()
        if self._heartbeat_task:
            self._heartbeat_task.cancel()  # the others are awaited by the endpoint
        for tm_id in list(self.slot_manager.task_managers) + list(self.slot_manager.pending_task_managers):
            await self._release(tm_id, "cluster shutting down")

    # --- TaskManagers -------------------------------------------------------------------------
    @rpc_method
    async def register_task_executor(self, msg: m.RegisterTaskExecutor) -> m.RegistrationResponse:
        if msg.tm_id in self._lost:
            # e.g. Spark retrying the task of a TaskManager we already declared lost and released
            log.warning("[ResourceManager] refused registration of %s: it was declared lost", msg.tm_id)
            return m.RegistrationResponse(accepted=False, reason=f"TaskManager {msg.tm_id} was declared lost; it must not come back")
        self.slot_manager.register(msg)
        log.info(
            "[ResourceManager] TaskManager %s registered: %d slots, data %s:%d, pid %d%s",
            msg.tm_id, msg.num_slots, msg.data_address.host, msg.data_address.port, msg.pid,
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
        now = time.monotonic()
        return m.TaskManagerList(
            task_managers=[
                m.TaskManagerInfo(
                    tm_id=t.tm_id,
                    host=t.registration.hostname,
                    pid=t.registration.pid,
                    data_port=t.data_address.port,
                    slots_total=len(t.slots),
                    slots_free=len(t.free_slots()),
                    heartbeat_age_ms=int((now - t.last_heartbeat) * 1000),
                    spark_executor_id=t.registration.spark_executor_id,
                    resource_profile=t.registration.resource_profile,
                )
                for t in self.slot_manager.task_managers.values()
            ]
        )

    def _tm_lost(self, tm_id: str, cause: str) -> None:
        if tm_id not in self.slot_manager.task_managers and tm_id not in self.slot_manager.pending_task_managers:
            return
        where = self.provider.describe(tm_id)
        self._lost.add(tm_id)
        jobs = self.slot_manager.unregister(tm_id)
        log.warning("[ResourceManager] TaskManager %s (%s) lost: %s", tm_id, where, cause)
        for job_id in jobs:
            jm = self.rpc.gateway(gw.job_master_endpoint(job_id))
            self.spawn(self._notify_lost(jm, m.TaskManagerLost(tm_id=tm_id, cause=f"TaskManager {tm_id} ({where}) was lost: {cause}")))
        try:
            self.provider.release_task_manager(tm_id)
        except Exception:  # noqa: BLE001
            log.exception("[ResourceManager] provider failed to release %s", tm_id)
        self._check_resources()

    async def _notify_lost(self, jm: Any, msg: m.TaskManagerLost) -> None:
        try:
            await jm.disconnect_task_manager(msg, timeout=10)
        except Exception:  # noqa: BLE001 - the job may have ended
            pass

    async def _heartbeat_loop(self) -> None:
        interval = self.config.heartbeat_interval_ms / 1000
        timeout = self.config.heartbeat_timeout_ms / 1000
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for tm_id, tmr in list(self.slot_manager.task_managers.items()):
                if now - tmr.last_heartbeat > timeout:
                    self._tm_lost(tm_id, f"no heartbeat for {timeout:.0f}s")
                    continue
                self.spawn(self._heartbeat(tm_id))
            for tm_id, since in list(self.slot_manager.pending_task_managers.items()):
                if now - since > self.config.tm_registration_timeout_s:
                    log.warning("[ResourceManager] TaskManager %s did not register in %.0fs", tm_id, self.config.tm_registration_timeout_s)
                    self._tm_lost(tm_id, "did not register in time")

    async def _heartbeat(self, tm_id: str) -> None:
        te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=tm_id)
        try:
            hb: m.TaskExecutorHeartbeat = await te.heartbeat_from_resource_manager(
                m.HeartbeatRequest(sender=self.endpoint_id, resource_manager_id=self.resource_manager_id), timeout=5
            )
            self.slot_manager.report(hb.slot_report)
        except Exception:  # noqa: BLE001 - missed heartbeats are counted by the timeout
            pass

    # --- jobs -----------------------------------------------------------------------------------
    @rpc_method
    async def declare_required_resources(self, msg: m.ResourceRequirements) -> m.Ack:
        self.slot_manager.declare(msg.job_id, msg.job_master_endpoint, msg.slots)
        self._check_resources()
        return m.Ack()

    def _check_resources(self) -> None:
        allocations, to_request = self.slot_manager.check()
        for a in allocations:
            self.spawn(self._request_slot(a))
        for _ in range(to_request):
            self._tm_seq += 1
            tm_id = f"tm-{self.resource_manager_id[:6]}-{self._tm_seq}"
            self.slot_manager.pending_task_managers[tm_id] = time.monotonic()
            spec = TaskManagerSpec(self.rpc.host, self.rpc.port, self.rpc.secret, self.config.slots_per_tm, self.config.profile)
            log.info("[ResourceManager] requesting TaskManager %s from %s", tm_id, self.provider.name)
            try:
                self.provider.start_task_manager(tm_id, spec)
            except Exception as e:  # noqa: BLE001 - jobs time out waiting for slots and say why
                log.error("[ResourceManager] could not start TaskManager %s: %s", tm_id, e)
                self.slot_manager.pending_task_managers.pop(tm_id, None)

    async def _request_slot(self, a: Any) -> None:
        te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=a.tm_id)
        try:
            await te.request_slot(
                m.RequestSlot(allocation_id=a.allocation_id, job_id=a.job_id, job_master_endpoint=a.job_master_endpoint, resource_manager_id=self.resource_manager_id),
                timeout=10,
            )
            self.slot_manager.confirm(a.tm_id, a.slot_index, a.allocation_id)
        except Exception as e:  # noqa: BLE001
            log.warning("[ResourceManager] slot request to %s failed: %s", a.tm_id, e)
            tmr = self.slot_manager.task_managers.get(a.tm_id)
            if tmr is not None:
                info = tmr.slots[a.slot_index]
                info.state, info.allocation_id, info.job_id, info.pending = info.state.__class__.FREE, None, None, False
            req = self.slot_manager.requirements.get(a.job_id)
            if req is not None:
                req.allocations.discard(a.allocation_id)

    async def _release(self, tm_id: str, cause: str) -> None:
        if tm_id in self.slot_manager.task_managers:
            te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=tm_id)
            try:
                await te.release(m.ReleaseTaskExecutor(cause=cause), timeout=3)
            except Exception:  # noqa: BLE001
                pass
        self.slot_manager.unregister(tm_id)
        try:
            self.provider.release_task_manager(tm_id)
        except Exception:  # noqa: BLE001
            log.exception("[ResourceManager] provider failed to release %s", tm_id)
