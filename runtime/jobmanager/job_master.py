"""JobMaster: runs one job: slots, deployment, task states, coordinators, job status (Flink: JobMaster + DefaultScheduler).

Scheduling here is eager (all regions at once, as streaming needs) with no restarts: a failed
task fails the job. Restart strategies and region failover arrive with checkpoints; they plug in
at `_on_task_failed`.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

import cloudpickle

from runtime.core.errors import NoResourceAvailableError, UnknownJobError
from runtime.core.state_machine import StateMachine
from runtime.core.states import ExecutionState, JobStatus, job_status_machine
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertex
from runtime.graph.job_graph import JobGraph
from runtime.jobmanager.deployment import build_tdd
from runtime.jobmanager.scheduler.slot_sharing import assign_slots, job_resource_requirements
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.service import RpcEndpoint, RpcService, rpc_method

log = logging.getLogger(__name__)

DEFAULT_SLOT_REQUEST_TIMEOUT_S = 60.0
_CONSEQUENTIAL_FAILURES = frozenset({"ProducerFailedError", "PartitionReleasedError", "TaskCanceled"})


class JobMaster(RpcEndpoint):
    def __init__(
        self,
        rpc: RpcService,
        job_graph: JobGraph,
        on_terminal: Callable[[m.JobResultMessage], None],
        on_status: Callable[[str, JobStatus, str | None], None] | None = None,
    ) -> None:
        super().__init__(rpc, gw.job_master_endpoint(job_graph.job_id))
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.eg = ExecutionGraph(job_graph)
        self.status: StateMachine[JobStatus] = job_status_machine(self.job_id)
        self.slot_pool = SlotPool(self.job_id)
        # per slot sharing group: its highest parallelism in slots of its resource profile
        self.resource_requirements = job_resource_requirements(job_graph)
        self.slots_needed = sum(r.count for r in self.resource_requirements)
        self.slot_timeout_s = float(job_graph.config.get("slot.request.timeout.s", DEFAULT_SLOT_REQUEST_TIMEOUT_S))
        self.coordinators: dict[int, Any] = {}
        self._coordinator_names: dict[int, str] = {}
        self.by_attempt: dict[str, ExecutionVertex] = {}
        self.placement: dict = {}
        self.metrics: dict[str, m.TaskMetricsSnapshot] = {}
        self.backpressure: dict[str, tuple[int, float]] = {}  # attempt -> (backpressured ms, ratio), for job details
        self.failure: m.ErrorInfo | None = None
        self.accumulators: dict[str, Any] = {}
        self.start_time = time.time()
        self.end_time: float | None = None
        self.deployed = False
        self._finishing = False
        self._on_terminal = on_terminal
        self._on_status = on_status
        self._rm = rpc.gateway(gw.RESOURCE_MANAGER)

    def _log(self, level: int, msg: str, *args: Any) -> None:
        log.log(level, f"[JobMaster {self.job_id} '{self.job_graph.job_name}'] {msg}", *args)

    def _set_status(self, to: JobStatus) -> None:
        self.status.transition(to)
        self._log(logging.INFO, "job status -> %s", to.name)
        if self._on_status is not None:
            cause = self.failure.describe() if self.failure and to in (JobStatus.FAILING, JobStatus.FAILED) else None
            self._on_status(self.job_id, to, cause)

    # --- lifecycle --------------------------------------------------------------------------
    async def on_start(self) -> None:
        if self.status.state is not JobStatus.CREATED:
            return  # cancelled before it started
        self.loop.call_later(self.slot_timeout_s, lambda: self.spawn(self._check_slot_timeout()))
        try:
            self._start_coordinators()
        except Exception as e:  # noqa: BLE001 - e.g. the sink's module cannot be imported here
            self._fail_job(m.ErrorInfo.from_exception(e, operator=getattr(e, "__millrace_operator__", None)))
            return
        self._set_status(JobStatus.RUNNING)
        for ev in self.eg.all_vertices():
            ev.current_execution.transition_state(ExecutionState.SCHEDULED)
        self._log(logging.INFO, "requesting %d slots: %s", self.slots_needed, "; ".join(r.describe() for r in self.resource_requirements))
        try:
            await self._declare_slots(self.slots_needed)
        except Exception as e:  # noqa: BLE001
            self._fail_job(m.ErrorInfo.from_exception(e))

    async def _declare_slots(self, slots: int) -> None:
        """Declare the job's requirements at the ResourceManager (any slots > 0: all of them; 0 clears).

        The ResourceManager refuses requirements no TaskManager it may start could ever serve;
        that fails the job with its explanation.
        """
        requirements = self.resource_requirements if slots > 0 else []
        ack: m.Ack = await self._rm.declare_required_resources(
            m.ResourceRequirements(
                job_id=self.job_id, job_master_endpoint=self.endpoint_id, job_name=self.job_graph.job_name, requirements=requirements
            )
        )
        if not ack.ok:
            raise NoResourceAvailableError(ack.message)

    def _start_coordinators(self) -> None:
        for jv in self.job_graph.vertices:
            for op in jv.operators:
                if op.coordinator_provider:
                    try:
                        provider = cloudpickle.loads(op.coordinator_provider)
                        coord = provider.create(self.job_id, op.name, jv.parallelism)
                        coord.start()
                    except Exception as e:
                        e.__millrace_operator__ = op.name  # type: ignore[attr-defined]
                        raise
                    self.coordinators[op.node_id] = coord
                    self._coordinator_names[op.node_id] = op.name

    async def _check_slot_timeout(self) -> None:
        if self.deployed or self.status.state is not JobStatus.RUNNING:
            return
        why = "Give the cluster more TaskManagers/slots, lower the parallelism, or raise slot.request.timeout.s"
        try:
            supply: m.ResourceStatus = await self._rm.resource_status(m.Empty(), timeout=3)
            if supply.last_start_failure:
                # the cluster is trying and failing: that, not the job's size, is the cause
                why = f"TaskManagers fail to start ({supply.start_failures} in a row); the last: {supply.last_start_failure}"
        except Exception:  # noqa: BLE001 - the hint is optional; the timeout is not
            pass
        if self.deployed or self.status.state is not JobStatus.RUNNING:
            return
        err = NoResourceAvailableError(
            f"job {self.job_id} '{self.job_graph.job_name}' could not get its slots within {self.slot_timeout_s:.0f}s: "
            f"it needs {self.slots_needed} slots and has {len(self.slot_pool)}. {why}"
        )
        self._fail_job(m.ErrorInfo.from_exception(err))

    # --- slots and deployment ----------------------------------------------------------------
    @rpc_method
    async def offer_slots(self, msg: m.OfferSlots) -> m.AcceptedSlots:
        if self.status.state is not JobStatus.RUNNING or self.deployed:
            return m.AcceptedSlots(allocation_ids=[])
        accepted = []
        for o in msg.offers:
            self.slot_pool.offer(PhysicalSlot(o.allocation_id, msg.tm_id, o.slot_index, msg.data_address, o.resource_profile))
            accepted.append(o.allocation_id)
        if len(self.slot_pool) >= self.slots_needed:
            self.loop.call_soon(self._deploy_all)
        return m.AcceptedSlots(allocation_ids=accepted)

    def _deploy_all(self) -> None:
        if self.deployed or self.status.state is not JobStatus.RUNNING:
            return
        try:
            placement = assign_slots(self.eg, self.slot_pool.available())
        except NoResourceAvailableError as e:
            # enough slots but not all of the shapes the groups need: wait for more offers (or the timeout)
            self._log(logging.WARNING, "cannot place the tasks yet: %s", e)
            return
        self.deployed = True
        self.placement = placement
        for ev in self.eg.all_vertices():
            ex = ev.current_execution
            ex.assigned_resource = self.placement[ev.id]
            self.by_attempt[ex.attempt_id] = ev
        self._log(logging.INFO, "deploying %d tasks to %d slots", len(self.by_attempt), len(self.slot_pool))
        for ev in self.eg.all_vertices():
            self.spawn(self._deploy(ev))

    async def _deploy(self, ev: ExecutionVertex) -> None:
        ex = ev.current_execution
        if ex.state is not ExecutionState.SCHEDULED:
            return
        ex.transition_state(ExecutionState.DEPLOYING)
        slot: PhysicalSlot = self.placement[ev.id]
        tdd = build_tdd(self.eg, ev, self.placement, self.job_graph.config)
        te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=slot.tm_id)
        try:
            await te.submit_task(tdd, timeout=30)
        except Exception as e:  # noqa: BLE001
            if ex.state is ExecutionState.DEPLOYING:
                ex.fail(None)
                self._on_task_failed(
                    ev, m.ErrorInfo(type_name=type(e).__name__, message=f"deployment to TaskManager {slot.tm_id} failed: {e}", task=ev.task_name_with_subtask, task_manager=slot.tm_id)
                )

    # --- task state -------------------------------------------------------------------------
    @rpc_method
    async def update_task_execution_state(self, msg: m.TaskExecutionStateUpdate) -> m.Ack:
        ev = self.by_attempt.get(msg.execution_attempt_id)
        if ev is None or ev.current_execution.attempt_id != msg.execution_attempt_id:
            return m.Ack(ok=False, message="unknown or stale attempt")
        ex = ev.current_execution
        self.metrics[msg.execution_attempt_id] = msg.metrics
        if ex.state.is_terminal or not ex.can_transition(msg.state):
            return m.Ack(ok=False, message=f"ignored {ex.state.name} -> {msg.state.name}")
        ex.transition_state(msg.state)
        if msg.state is ExecutionState.FAILED:
            ex.failure_info = msg.error
            self._on_task_failed(ev, msg.error or m.ErrorInfo(type_name="UnknownError", message="task failed", task=ev.task_name_with_subtask))
        elif msg.state is ExecutionState.CANCELED and self.status.state is JobStatus.RUNNING:
            self._on_task_failed(ev, msg.error or m.ErrorInfo(type_name="TaskCanceled", message="task was canceled unexpectedly", task=ev.task_name_with_subtask))
        elif msg.state is ExecutionState.FINISHED and self.status.state is JobStatus.RUNNING:
            if all(v.execution_state is ExecutionState.FINISHED for v in self.eg.all_vertices()):
                self.spawn(self._finish_job())
        self._check_terminal()
        return m.Ack()

    def _on_task_failed(self, ev: ExecutionVertex, error: m.ErrorInfo) -> None:
        """Failover hook: without a restart strategy, a task failure fails the job."""
        self._fail_job(error)

    @rpc_method
    async def disconnect_task_manager(self, msg: m.TaskManagerLost) -> m.Ack:
        lost = self.slot_pool.release_task_manager(msg.tm_id)
        if not lost or self.status.state.is_globally_terminal or self._finishing:
            return m.Ack()  # nothing of ours there, or every task already finished
        self._log(logging.WARNING, "%s", msg.cause)
        first: ExecutionVertex | None = None
        for ev in self.eg.all_vertices():
            slot = self.placement.get(ev.id)
            ex = ev.current_execution
            if slot is not None and slot.tm_id == msg.tm_id and not ex.state.is_terminal:
                ex.fail(msg.cause)
                first = first or ev
        if first is None:
            # only offered slots were there (nothing deployed): keep waiting and ask for replacements
            if self.status.state is JobStatus.RUNNING and not self.deployed:
                self.spawn(self._declare_slots(self.slots_needed))
            return m.Ack()
        err = m.ErrorInfo(type_name="TaskManagerLostError", message=msg.cause, task=first.task_name_with_subtask, task_manager=msg.tm_id)
        if self.status.state is JobStatus.RUNNING:
            self._fail_job(err)
        self._check_terminal()
        return m.Ack()

    def _fail_job(self, error: m.ErrorInfo) -> None:
        if self.status.state is not JobStatus.RUNNING and self.status.state is not JobStatus.CREATED:
            if self.status.state is JobStatus.FAILING and self._is_consequence(self.failure) and not self._is_consequence(error):
                # a consumer saw its producer's failure before the producer's own report arrived:
                # the job's cause is the producer's error, not the consumer's echo of it
                self.failure = error
                self._log(logging.ERROR, "job fails, root cause: %s", error.describe())
            return
        self.failure = error
        self._log(logging.ERROR, "job fails: %s", error.describe())
        self._set_status(JobStatus.FAILING)
        self.spawn(self._declare_slots(0))
        self._cancel_all()
        self._check_terminal()

    @staticmethod
    def _is_consequence(error: m.ErrorInfo | None) -> bool:
        """Failures that only echo another task's failure (a failed producer, a cancelled task)."""
        return error is not None and error.type_name in _CONSEQUENTIAL_FAILURES

    def _cancel_all(self) -> None:
        for ev in self.eg.all_vertices():
            ex = ev.current_execution
            if ex.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
                ex.transition_state(ExecutionState.CANCELED)
            elif not ex.state.is_terminal and ex.state is not ExecutionState.CANCELING:
                ex.transition_state(ExecutionState.CANCELING)
                slot = self.placement.get(ev.id)
                if slot is not None:
                    te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=slot.tm_id)
                    self.spawn(self._cancel_task(te, ev, ex.attempt_id))

    async def _cancel_task(self, te: Any, ev: ExecutionVertex, attempt_id: str) -> None:
        try:
            ack: m.Ack = await te.cancel_task(m.CancelTask(execution_attempt_id=attempt_id), timeout=10)
            gone = not ack.ok  # the TaskExecutor does not know the attempt (never arrived or already ended)
        except Exception:  # noqa: BLE001 - an unreachable TaskManager's tasks are gone anyway
            gone = True
        ex = ev.current_execution
        if gone and ex.attempt_id == attempt_id and not ex.state.is_terminal:
            ex.transition_state(ExecutionState.CANCELED)
            self._check_terminal()

    @rpc_method
    async def cancel(self, msg: m.Empty | None = None) -> m.Ack:
        if self._finishing:
            # every task finished and the final commit runs: its outcome decides FINISHED or FAILED
            return m.Ack(ok=False, message=f"job {self.job_id} is committing its results and can no longer be cancelled")
        if self.status.state in (JobStatus.RUNNING, JobStatus.CREATED, JobStatus.FAILING):
            if self.status.state is not JobStatus.FAILING:
                self._set_status(JobStatus.CANCELLING)
                self.spawn(self._declare_slots(0))
            self._cancel_all()
            self._check_terminal()
        return m.Ack()

    def _check_terminal(self) -> None:
        st = self.status.state
        if st not in (JobStatus.FAILING, JobStatus.CANCELLING):
            return
        if all(ev.execution_state.is_terminal for ev in self.eg.all_vertices()):
            self._finalize(JobStatus.FAILED if st is JobStatus.FAILING else JobStatus.CANCELED)

    async def _finish_job(self) -> None:
        """All tasks finished: coordinators commit (e.g. the Delta sink), then the job is FINISHED.

        While this runs the job is 'finishing': cancels are refused and TaskManager losses ignored,
        so nothing closes a coordinator (deleting its files) under a commit in flight.
        """
        if self._finishing:
            return
        self._finishing = True
        try:
            per_operator: dict[str, Any] = {}
            for node_id, coord in self.coordinators.items():
                result = await self.loop.run_in_executor(None, coord.on_job_finished)
                if result:
                    per_operator[self._coordinator_names[node_id]] = result
                    # flat keys for the common one-sink job; with several, the first one's stay
                    for k, v in result.items():
                        self.accumulators.setdefault(k, v)
            if per_operator:
                self.accumulators["operators"] = per_operator
        except Exception as e:  # noqa: BLE001 - a failed commit fails the job; nothing partial is visible
            self.failure = m.ErrorInfo.from_exception(e)
            self._log(logging.ERROR, "commit at job end failed: %s", self.failure.describe())
            self._set_status(JobStatus.FAILING)
            self._finalize(JobStatus.FAILED)
            return
        self._finalize(JobStatus.FINISHED)

    def _finalize(self, status: JobStatus) -> None:
        if self.status.state.is_globally_terminal:
            return
        self.end_time = time.time()
        for coord in self.coordinators.values():
            try:
                coord.close()
            except Exception:  # noqa: BLE001
                self._log(logging.WARNING, "coordinator close failed")
        self._set_status(status)
        self.spawn(self._release_resources())
        self._on_terminal(self.result())

    async def _release_resources(self) -> None:
        # clear the requirement first, so the ResourceManager does not hand freed slots back to us
        try:
            await self._declare_slots(0)
        except Exception:  # noqa: BLE001
            self._log(logging.WARNING, "could not clear the slot requirement at the ResourceManager")
        frees = []
        for slot in list(self.slot_pool.slots.values()):
            te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=slot.tm_id)
            frees.append(self._free_slot(te, slot.allocation_id))
        if frees:
            await asyncio.gather(*frees)

    async def _free_slot(self, te: Any, allocation_id: str) -> None:
        try:
            await te.free_slot(m.FreeSlot(allocation_id=allocation_id, cause=f"job {self.job_id} ended"), timeout=10)
        except Exception:  # noqa: BLE001
            pass

    # --- coordinators -------------------------------------------------------------------------
    @rpc_method
    async def send_operator_event(self, msg: m.OperatorEventMessage) -> m.Ack:
        coord = self.coordinators.get(msg.node_id)
        if coord is None:
            return m.Ack(ok=False, message=f"no coordinator for operator {msg.node_id}")
        event = cloudpickle.loads(msg.payload)
        coord.handle_event_from_operator(msg.subtask_index, msg.attempt_number, event)
        return m.Ack()

    @rpc_method
    async def handle_coordination_request(self, msg: m.CoordinationRequest) -> m.CoordinationResponse:
        coord = self.coordinators.get(msg.node_id)
        if coord is None:
            raise UnknownJobError(f"job {self.job_id} has no coordinator for operator {msg.node_id}")
        response = coord.handle_coordination_request(cloudpickle.loads(msg.payload))
        return m.CoordinationResponse(payload=cloudpickle.dumps(response))

    # --- views ----------------------------------------------------------------------------------
    def vertex_metrics(self) -> list[m.VertexMetrics]:
        out = []
        for ejv in self.eg.job_vertices:
            rin = rout = 0
            states = []
            for ev in ejv.task_vertices:
                snap = self.metrics.get(ev.current_execution.attempt_id)
                if snap is not None:
                    rin += snap.records_in
                    rout += snap.records_out
                states.append(ev.execution_state)
            out.append(m.VertexMetrics(vertex_id=ejv.id, name=ejv.name, parallelism=ejv.parallelism, records_in=rin, records_out=rout, subtask_states=states))
        return out

    def result(self) -> m.JobResultMessage:
        end = self.end_time or time.time()
        running = [
            ex.state_timestamps[ExecutionState.RUNNING]
            for ev in self.eg.all_vertices()
            for ex in [ev.current_execution]
            if ExecutionState.RUNNING in ex.state_timestamps
        ]
        return m.JobResultMessage(
            job_id=self.job_id,
            job_name=self.job_graph.job_name,
            status=self.status.state,
            duration_ms=int((end - self.start_time) * 1000),
            running_ms=int((end - min(running)) * 1000) if running else None,
            error=self.failure if self.status.state is not JobStatus.FINISHED else None,
            accumulators_pickle=cloudpickle.dumps(self.accumulators) if self.accumulators else None,
            vertices=self.vertex_metrics(),
        )

    @rpc_method
    async def request_job_details(self, msg: m.Empty | None = None) -> m.JobDetailsMessage:
        """Status, placement and metrics of every subtask; live metrics are fetched from the TaskExecutors first."""
        if not self.status.state.is_globally_terminal:
            await self._refresh_task_metrics()
        return self.job_details()

    async def _refresh_task_metrics(self, timeout_s: float = 2.0) -> None:
        """Ask every TaskExecutor running our tasks for their metrics, in parallel; a silent one keeps the last known."""
        by_tm: dict[str, list[str]] = {}
        for ev in self.eg.all_vertices():
            ex = ev.current_execution
            slot = self.placement.get(ev.id)
            if slot is not None and ex.state in (ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.CANCELING):
                by_tm.setdefault(slot.tm_id, []).append(ex.attempt_id)
        if not by_tm:
            return

        async def ask(tm_id: str, attempts: list[str]) -> m.TaskMetricsReport | None:
            te = self.rpc.gateway(gw.TASK_EXECUTOR, peer_id=tm_id)
            try:
                return await te.request_task_metrics(m.TaskMetricsRequest(attempt_ids=attempts), timeout=timeout_s)
            except Exception as e:  # noqa: BLE001 - lost or busy TaskManager: keep the last known metrics
                self._log(logging.DEBUG, "no metrics from TaskManager %s: %s", tm_id, e)
                return None

        reports = await asyncio.gather(*(ask(tm, attempts) for tm, attempts in by_tm.items()))
        for report in reports:
            for entry in report.tasks if report is not None else []:
                ev = self.by_attempt.get(entry.attempt_id)
                # a terminal attempt's final metrics came with its state update; do not overwrite them
                if ev is None or ev.current_execution.attempt_id != entry.attempt_id or ev.execution_state.is_terminal:
                    continue
                self.metrics[entry.attempt_id] = entry.metrics
                self.backpressure[entry.attempt_id] = (entry.backpressured_ms, entry.backpressure_ratio)

    def job_details(self) -> m.JobDetailsMessage:
        """The job as the REST API shows it (also called on a stopped JobMaster for an ended job)."""

        def ms(t: float | None) -> int | None:
            return None if t is None else int(t * 1000)

        vertices = []
        for ejv in self.eg.job_vertices:
            subtasks = []
            for ev in ejv.task_vertices:
                ex = ev.current_execution
                slot = self.placement.get(ev.id) if ex.assigned_resource is not None else None
                bp_ms, bp_ratio = self.backpressure.get(ex.attempt_id, (0, 0.0))
                failure = ex.failure_info if isinstance(ex.failure_info, m.ErrorInfo) else None
                subtasks.append(
                    m.SubtaskDetails(
                        subtask_index=ev.subtask_index,
                        state=ex.state,
                        attempt_number=ex.attempt_number,
                        attempt_id=ex.attempt_id,
                        tm_id=slot.tm_id if slot is not None else None,
                        host=slot.data_address.host if slot is not None else None,
                        state_timestamps_ms={st.value: int(ts * 1000) for st, ts in ex.state_timestamps.items()},
                        metrics=self.metrics.get(ex.attempt_id) or m.TaskMetricsSnapshot(),
                        backpressured_ms=bp_ms,
                        backpressure_ratio=0.0 if ex.state.is_terminal else bp_ratio,
                        failure=failure,
                    )
                )
            vertices.append(
                m.VertexDetails(
                    vertex_id=ejv.id, name=ejv.name, parallelism=ejv.parallelism, max_parallelism=ejv.max_parallelism,
                    slot_sharing_group=ejv.job_vertex.slot_sharing_group, subtasks=subtasks,
                )
            )
        status = self.status.state
        return m.JobDetailsMessage(
            job_id=self.job_id,
            job_name=self.job_graph.job_name,
            status=status,
            start_time_ms=int(self.start_time * 1000),
            end_time_ms=ms(self.end_time),
            vertices=vertices,
            error=self.failure if status is not JobStatus.FINISHED else None,
        )
