"""JobMaster: the endpoint that runs one job (Flink: JobMaster).

It holds the slot pool and the connections to TaskExecutors and the ResourceManager, answers RPCs
on its main thread, and delegates every scheduling decision (deployment, failover, restarts,
checkpoints, the job status) to the SchedulerNG it hosts (`scheduler/ng.py`: the default or the
adaptive scheduler, by `jobmanager.scheduler`); to it, the JobMaster is a SchedulerHost. Readers from
other threads (the Dispatcher, REST) get immutable messages: live views through RPC, the archived
view once the job ended.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import cloudpickle

from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph
from runtime.jobmanager.scheduler.default import DEFAULT_SLOT_REQUEST_TIMEOUT_S  # noqa: F401 - re-exported for older callers
from runtime.jobmanager.scheduler.ng import SchedulerNG, create_scheduler
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.service import RpcEndpoint, RpcService, rpc_method

log = logging.getLogger(__name__)

PUBLISHED_VIEWS = ("job_details", "job_exceptions", "checkpoint_statistics")


class JobMaster(RpcEndpoint):
    def __init__(
        self,
        rpc: RpcService,
        job_graph: JobGraph,
        on_terminal: Callable[[m.JobResultMessage], None],
        on_status: Callable[[str, JobStatus, str | None], None] | None = None,
        *,
        recovered: bool = False,
        confirm_leadership: Callable[[], bool] | None = None,
        fencing_token: str | None = None,
    ) -> None:
        """`recovered`: started by a new leader after a failover (it restores the job's latest
        checkpoint); `confirm_leadership`: the fence every commit passes (high availability)."""
        super().__init__(rpc, gw.job_master_endpoint(job_graph.job_id))
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.slot_pool = SlotPool(self.job_id)
        self.rm = rpc.gateway(gw.ResourceManagerGateway, gw.RESOURCE_MANAGER)
        self._on_terminal = on_terminal
        self._recovered = recovered
        self.fencing_token = fencing_token  # set before the endpoint serves: every call must carry it
        self._confirm_leadership = confirm_leadership
        self._on_status = on_status
        self.scheduler: SchedulerNG = create_scheduler(self, job_graph)
        # The views other threads may read (the Dispatcher when this endpoint does not answer: not
        # started yet, stopping, stopped): immutable messages, replaced on the main thread each time
        # it answers for one, and at the job's end. Built here before the endpoint runs.
        self._published: dict[str, Any] = {view: getattr(self, view)() for view in PUBLISHED_VIEWS}

    # --- what the scheduler uses of its host (SchedulerHost) ------------------------------------
    def task_executor(self, tm_id: str) -> gw.TaskExecutorGateway:
        return self.rpc.gateway(gw.TaskExecutorGateway, gw.TASK_EXECUTOR, peer_id=tm_id)

    def status_changed(self, status: JobStatus, cause: str | None) -> None:
        if self._on_status is not None:
            self._on_status(self.job_id, status, cause)

    def job_reached_terminal(self, result: m.JobResultMessage) -> None:
        for view in PUBLISHED_VIEWS:  # the final views, before anyone hears of the end
            self._publish(view)
        self._on_terminal(result)

    @property
    def recovered(self) -> bool:
        return self._recovered

    def confirm_leadership(self) -> bool:
        return self._confirm_leadership is None or self._confirm_leadership()

    async def suspend(self, cause: str) -> None:
        """The Dispatcher lost its leadership: the job stops here, SUSPENDED (not an RPC: the Dispatcher's own call)."""
        self.scheduler.suspend(cause)

    async def release_resources(self) -> None:
        # clear the requirement first, so the ResourceManager does not hand freed slots back to us
        try:
            await self.scheduler.declare_slots(0)
        except Exception:  # noqa: BLE001 - a lost ResourceManager: the slots are freed at the TaskManagers below anyway
            log.warning("[JobMaster %s] could not clear the slot requirement at the ResourceManager", self.job_id)
        frees = [self._free_slot(self.task_executor(slot.tm_id), slot.allocation_id) for slot in list(self.slot_pool.slots.values())]
        if frees:
            await asyncio.gather(*frees)

    async def _free_slot(self, te: gw.TaskExecutorGateway, allocation_id: str) -> None:
        try:
            await te.free_slot(m.FreeSlot(allocation_id=allocation_id, cause=f"job {self.job_id} ended"), timeout=10)
        except Exception:  # noqa: BLE001 - a lost TaskManager holds no slot to free
            pass

    # --- compatibility views (tests and the Dispatcher read these on a stopped JobMaster) -------
    @property
    def status(self) -> Any:
        return self.scheduler.status

    @property
    def eg(self) -> Any:
        return self.scheduler.eg

    @property
    def coordinators(self) -> Any:
        return self.scheduler.coordinators

    # --- lifecycle --------------------------------------------------------------------------
    async def on_start(self) -> None:
        await self.scheduler.start()

    # --- slots ------------------------------------------------------------------------------
    @rpc_method
    async def offer_slots(self, msg: m.OfferSlots) -> m.AcceptedSlots:
        if not self.scheduler.wants_slots():
            return m.AcceptedSlots(allocation_ids=[])
        accepted = []
        for o in msg.offers:
            self.slot_pool.offer(PhysicalSlot(o.allocation_id, msg.tm_id, o.slot_index, msg.data_address, o.resource_profile))
            accepted.append(o.allocation_id)
        self.loop.call_soon(self.scheduler.on_slots_offered)
        return m.AcceptedSlots(allocation_ids=accepted)

    @rpc_method
    async def disconnect_task_manager(self, msg: m.TaskManagerLost) -> m.Ack:
        self.scheduler.task_manager_lost(msg.tm_id, msg.cause)
        return m.Ack()

    # --- tasks ------------------------------------------------------------------------------
    @rpc_method
    async def update_task_execution_state(self, msg: m.TaskExecutionStateUpdate) -> m.Ack:
        return self.scheduler.update_task_execution_state(msg)

    @rpc_method
    async def cancel(self, msg: m.Empty | None = None) -> m.Ack:
        return self.scheduler.cancel()

    # --- checkpoints --------------------------------------------------------------------------
    @rpc_method
    async def acknowledge_checkpoint(self, msg: m.AcknowledgeCheckpoint) -> m.Ack:
        return await self.scheduler.acknowledge_checkpoint(msg)

    @rpc_method
    async def decline_checkpoint(self, msg: m.DeclineCheckpoint) -> m.Ack:
        return await self.scheduler.decline_checkpoint(msg)

    @rpc_method
    async def trigger_checkpoint(self, msg: m.Empty | None = None) -> m.Ack:
        """Trigger a checkpoint now (tests, operators); refused when one is pending or tasks are not all running."""
        if self.scheduler.checkpoints is None:
            return m.Ack(ok=False, message=f"job {self.job_id} does not checkpoint")
        cid = await self.scheduler.trigger_checkpoint()
        return m.Ack(ok=cid is not None, message=str(cid) if cid is not None else "not triggered now")

    @rpc_method
    async def trigger_savepoint(self, msg: m.TriggerSavepoint) -> m.SavepointLocation:
        """Returns when the savepoint is committed (and, with `stop`, the job is ending); raises if it failed."""
        return await self.scheduler.trigger_savepoint(msg.target_directory, msg.stop, msg.drain)

    @rpc_method
    async def source_reached_end_of_input(self, msg: m.SourceReachedEndOfInput) -> m.Ack:
        return self.scheduler.source_reached_end_of_input(msg.execution_attempt_id)

    # --- coordinators -------------------------------------------------------------------------
    @rpc_method
    async def send_operator_event(self, msg: m.OperatorEventMessage) -> m.Ack:
        return self.scheduler.deliver_operator_event(msg.node_id, msg.subtask_index, msg.attempt_number, cloudpickle.loads(msg.payload))

    @rpc_method
    async def handle_coordination_request(self, msg: m.CoordinationRequest) -> m.CoordinationResponse:
        response = self.scheduler.deliver_coordination_request(msg.node_id, cloudpickle.loads(msg.payload))
        return m.CoordinationResponse(payload=cloudpickle.dumps(response))

    # --- views ----------------------------------------------------------------------------------
    def result(self) -> m.JobResultMessage:
        return self.scheduler.result()

    def job_details(self) -> m.JobDetailsMessage:
        """Archived once the job ended (immutable); live otherwise (call on the main thread)."""
        return self.scheduler.archived or self.scheduler.job_details()

    def job_exceptions(self) -> m.JobExceptionsMessage:
        return self.scheduler.exceptions()

    def checkpoint_statistics(self) -> m.CheckpointStatisticsMessage:
        return self.scheduler.checkpoint_statistics()

    def _publish(self, view: str) -> Any:
        """Main thread: compute a view and publish it for other threads."""
        value = getattr(self, view)()
        self._published[view] = value  # one reference replaced: readers see the old or the new message
        return value

    def published(self, view: str) -> Any:
        """Any thread: the newest published `view` ("job_details", "job_exceptions", "checkpoint_statistics")."""
        return self._published[view]

    @rpc_method
    async def request_job_details(self, msg: m.Empty | None = None) -> m.JobDetailsMessage:
        """Status, placement and metrics of every subtask; live metrics are fetched from the TaskExecutors first."""
        if not self.scheduler.status.state.is_terminal:
            await self._refresh_task_metrics()
        return self._publish("job_details")

    @rpc_method
    async def request_job_exceptions(self, msg: m.Empty | None = None) -> m.JobExceptionsMessage:
        return self._publish("job_exceptions")

    @rpc_method
    async def request_checkpoint_statistics(self, msg: m.Empty | None = None) -> m.CheckpointStatisticsMessage:
        return self._publish("checkpoint_statistics")

    # --- resource requirements (Flink 1.18: /jobs/:jobid/resource-requirements) ----------------
    @rpc_method
    async def request_resource_requirements(self, msg: m.Empty | None = None) -> m.JobResourceRequirements:
        return m.JobResourceRequirements(job_id=self.job_id, requirements=self.scheduler.job_resource_requirements(), scheduler=self.scheduler.name)

    @rpc_method
    async def update_resource_requirements(self, msg: m.JobResourceRequirements) -> m.Ack:
        """New per-vertex parallelism bounds; refused (ok=False, naming each problem) under the default scheduler or when wrong."""
        from runtime.jobmanager.scheduler.adaptive.scheduler import AdaptiveScheduler, validate_requirements

        if not isinstance(self.scheduler, AdaptiveScheduler):
            return m.Ack(ok=False, message=(
                f"job {self.job_id} runs under the {self.scheduler.name} scheduler, whose parallelism is fixed: submit it with "
                "jobmanager.scheduler: adaptive to change its resource requirements (or stop it with a savepoint and run -s -p N)"
            ))
        problems = validate_requirements(self.job_graph, msg.requirements)
        if problems:
            return m.Ack(ok=False, message="; ".join(problems))
        self.scheduler.update_resource_requirements(msg.requirements)
        return m.Ack()

    async def _refresh_task_metrics(self, timeout_s: float = 2.0) -> None:
        await self.scheduler.refresh_task_metrics(timeout_s)
