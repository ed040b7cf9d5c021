"""The adaptive scheduler (Flink: AdaptiveScheduler, and reactive mode on top of it).

A streaming job's parallelism follows the slots it holds. The scheduler declares a range of slots
(its minimum to its upper bound; reactive mode: every free slot, up to each vertex's max
parallelism, without starting TaskManagers), waits for the minimum and for the slots to settle,
decides each vertex's parallelism (`parallelism.py`), and runs the job as an *execution*: a
DefaultScheduler over the JobGraph at that parallelism, restoring the newest checkpoint. When slots
appear (after the cooldown) or are lost, or the resource requirements change, it takes a
checkpoint, cancels the execution and starts the next one at the new parallelism; key groups are
redistributed by the same code that restores a savepoint at another parallelism, and the Delta
sink commits exactly once across executions (one job id, idempotent commits). Failures restart
the whole job (Flink's adaptive scheduler has no region failover) under the job's restart
strategy, at whatever parallelism the slots then allow. States: `states.py`.
"""
from __future__ import annotations

import asyncio
import logging
import pickle
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import cloudpickle

from runtime.core.errors import CheckpointError, NoResourceAvailableError
from runtime.core.options import checkpointing as checkpointing_options
from runtime.core.options import jobmanager as jobmanager_options
from runtime.core.state_machine import StateMachine
from runtime.core.states import JobStatus, job_status_machine
from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph import JobGraph, PartitionerKind
from runtime.jobmanager.checkpoint.config import CheckpointCoordinatorConfiguration
from runtime.jobmanager.scheduler import views
from runtime.jobmanager.scheduler.adaptive import states as st
from runtime.jobmanager.scheduler.adaptive.parallelism import (
    VertexParallelismBounds,
    VertexSlots,
    desired_slots,
    determine_parallelism,
    minimum_slots,
)
from runtime.jobmanager.scheduler.adaptive.rescale import RescaleManager, ResourceWait
from runtime.jobmanager.scheduler.coordinators import OperatorCoordinators
from runtime.jobmanager.scheduler.default import DefaultScheduler
from runtime.jobmanager.scheduler.failover import restart_strategy_from_config
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m

if TYPE_CHECKING:
    from runtime.jobmanager.checkpoint.coordinator import CheckpointCoordinator
    from runtime.jobmanager.scheduler.ng import SchedulerHost

log = logging.getLogger(__name__)

DEFAULT_RESOURCE_WAIT_TIMEOUT_S = 300.0  # Flink's default; reactive mode waits forever
RESCALE_CHECKPOINT_TIMEOUT_S = 30.0


class _ExecutionHost:
    """What an execution sees of its host: the JobMaster's, except that its status, its end, its
    slot declarations and its slot release belong to the adaptive scheduler."""

    def __init__(self, owner: AdaptiveScheduler) -> None:
        self._owner = owner
        self._host = owner.host
        self.endpoint_id = owner.host.endpoint_id
        self.slot_pool = owner.host.slot_pool
        self.ended: asyncio.Future[m.JobResultMessage] = owner.host.loop.create_future()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._host.loop

    @property
    def rm(self) -> Any:
        return self

    async def declare_required_resources(self, msg: m.ResourceRequirements, timeout: float = gw.DEFAULT_TIMEOUT_S) -> m.Ack:
        return m.Ack()  # the adaptive scheduler declares the job's slots (a range), not the execution

    async def resource_status(self, msg: m.Empty, timeout: float = gw.DEFAULT_TIMEOUT_S) -> m.ResourceStatus:
        return await self._host.rm.resource_status(msg, timeout=timeout)

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Future[Any]:
        return self._host.spawn(coro)

    def task_executor(self, tm_id: str) -> gw.TaskExecutorGateway:
        return self._host.task_executor(tm_id)

    def status_changed(self, status: JobStatus, cause: str | None) -> None:
        pass  # the job's status is the adaptive scheduler's

    def job_reached_terminal(self, result: m.JobResultMessage) -> None:
        if not self.ended.done():
            self.ended.set_result(result)
        self._owner._execution_ended(self, result)

    async def release_resources(self) -> None:
        pass  # the slots stay with the job for its next execution

    @property
    def recovered(self) -> bool:
        return self._host.recovered

    @property
    def fencing_token(self) -> str | None:
        return self._host.fencing_token

    def confirm_leadership(self) -> bool:
        return self._host.confirm_leadership()


class AdaptiveScheduler:
    name = "adaptive"

    def __init__(self, host: SchedulerHost, job_graph: JobGraph, clock: Callable[[], float] = time.time, reactive: bool = False) -> None:
        self.host = host
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.clock = clock
        self.reactive = reactive
        self.status: StateMachine[JobStatus] = job_status_machine(self.job_id)
        self.state: st.AdaptiveState = st.Created()
        config = job_graph.config
        self.checkpoint_config = CheckpointCoordinatorConfiguration.from_config(config, self.job_id)
        self.restart_strategy = restart_strategy_from_config(config, self.checkpoint_config.enabled, clock=clock)
        wait_ms = jobmanager_options.RESOURCE_WAIT_TIMEOUT.get(config)
        if wait_ms is None:
            self.wait_timeout_s: float | None = None if reactive else DEFAULT_RESOURCE_WAIT_TIMEOUT_S
        else:
            self.wait_timeout_s = None if wait_ms < 0 else wait_ms / 1000.0
        self.stabilization_s = jobmanager_options.RESOURCE_STABILIZATION_TIMEOUT.get(config) / 1000.0
        self.rescales_manager = RescaleManager(
            clock, jobmanager_options.SCALING_INTERVAL_MIN.get(config) / 1000.0, jobmanager_options.MIN_PARALLELISM_INCREASE.get(config)
        )
        self.requirements: dict[str, VertexParallelismBounds] = {
            jv.id: VertexParallelismBounds(lower_bound=1, upper_bound=jv.max_parallelism if reactive else max(1, min(jv.parallelism, jv.max_parallelism)))
            for jv in job_graph.vertices
        }
        self.execution: DefaultScheduler | None = None
        self._execution_host: _ExecutionHost | None = None
        self.parallelism: dict[str, int] = {}
        self.rescales: list[m.RescaleEvent] = []
        self.exception_history: list[views.ExceptionView] = []
        self.failure: m.ErrorInfo | None = None
        self.num_restarts = 0
        self.start_time = clock()
        self.end_time: float | None = None
        self.archived: m.JobDetailsMessage | None = None
        self._wait: ResourceWait | None = None
        self._check_handle: asyncio.TimerHandle | None = None
        self._last_checkpoint_id = 0  # the highest id an execution used: the next one continues after it
        self._restorable: Any = None  # the newest completed checkpoint or savepoint: where the next execution starts
        self._first_savepoint_path = checkpointing_options.SAVEPOINT_PATH.get(config)
        self._rescale_triggered_at: float | None = None
        self._requirements_pending = False

    # --- helpers ----------------------------------------------------------------------------------
    def _log(self, level: int, msg: str, *args: Any) -> None:
        log.log(level, f"[JobMaster {self.job_id} '{self.job_graph.job_name}' adaptive] {msg}", *args)

    def _to(self, state: st.AdaptiveState) -> None:
        st.check_transition(self.job_id, self.state, state)
        self._log(logging.INFO, "%s -> %s", self.state.name, state.name)
        self.state = state
        self._set_status(state.job_status)

    def _set_status(self, to: JobStatus) -> None:
        if self.status.state is to or not self.status.can_transition(to):
            return
        self.status.transition(to)
        self._log(logging.INFO, "job status -> %s", to.name)
        failed = self.failure.describe() if self.failure and to in (JobStatus.FAILING, JobStatus.FAILED) else None
        self.host.status_changed(to, failed)

    def _vertex_slots(self) -> list[VertexSlots]:
        return [
            VertexSlots(jv.id, jv.slot_sharing_group, self.requirements[jv.id].lower_bound, self.requirements[jv.id].upper_bound)
            for jv in self.job_graph.vertices
        ]

    def _decide(self, slots: int) -> dict[str, int] | None:
        """Each vertex's parallelism on `slots`; vertices joined by forward edges run at one parallelism."""
        decided = determine_parallelism(self._vertex_slots(), slots)
        if decided is None:
            return None
        parent = {jv.id: jv.id for jv in self.job_graph.vertices}

        def find(v: str) -> str:
            while parent[v] != v:
                parent[v] = parent[parent[v]]
                v = parent[v]
            return v

        for jv in self.job_graph.vertices:
            for edge in jv.inputs:
                if edge.partitioner is PartitionerKind.FORWARD:
                    parent[find(edge.source_vertex_id)] = find(jv.id)
        lowest: dict[str, int] = {}
        for v, p in decided.items():
            lowest[find(v)] = min(lowest.get(find(v), p), p)
        return {v: lowest[find(v)] for v in decided}

    def _slots(self) -> int:
        return len(self.host.slot_pool)

    # --- SchedulerNG: start, resources --------------------------------------------------------------
    async def start(self) -> None:
        if not isinstance(self.state, st.Created):
            return
        self._log(logging.INFO, "adaptive scheduler%s: bounds %s", " (reactive mode)" if self.reactive else "",
                  ", ".join(f"{jv.name} {self.requirements[jv.id].lower_bound}..{self.requirements[jv.id].upper_bound}"
                            for jv in self.job_graph.vertices))
        self._wait_for_resources(after_restart=False)
        try:
            await self.declare_slots(1)
        except Exception as e:  # noqa: BLE001 - whatever keeps the job from its slots fails the job, with its cause
            self._fail(m.ErrorInfo.from_exception(e))

    async def declare_slots(self, slots: int) -> None:
        """Declare the job's slot range at the ResourceManager (0 clears it)."""
        vertices = self._vertex_slots()
        requirements = []
        if slots > 0 and not self.state.job_status.is_terminal:
            groups = sorted({v.slot_sharing_group for v in vertices})
            for g in groups:
                members = [v for v in vertices if v.slot_sharing_group == g]
                requirements.append(m.ResourceRequirement(
                    slot_sharing_group=g, count=desired_slots(members), min_count=minimum_slots(members), elastic=self.reactive,
                ))
        ack: m.Ack = await self.host.rm.declare_required_resources(
            m.ResourceRequirements(job_id=self.job_id, job_master_endpoint=self.host.endpoint_id, job_name=self.job_graph.job_name,
                                   requirements=requirements, job_master_token=self.host.fencing_token)
        )
        if not ack.ok:
            raise NoResourceAvailableError(ack.message)

    def wants_slots(self) -> bool:
        return not self.state.job_status.is_terminal and self._slots() < desired_slots(self._vertex_slots())

    def on_slots_offered(self) -> None:
        if self._wait is not None:
            self._wait.slots_changed()
        if self.execution is not None:
            self.execution.on_slots_offered()
        self._check_resources()

    def task_manager_lost(self, tm_id: str, cause: str) -> None:
        if self.execution is not None and self.state.has_execution:
            self.execution.task_manager_lost(tm_id, cause)  # its tasks fail: the execution ends, the job restarts smaller
        else:
            self.host.slot_pool.release_task_manager(tm_id)
        if not self.state.job_status.is_terminal:
            self.host.spawn(self._redeclare())

    async def _redeclare(self) -> None:
        try:
            await self.declare_slots(1)
        except Exception as e:  # noqa: BLE001 - the next slot report declares again
            self._log(logging.WARNING, "could not declare slots again: %s", e)

    def _arm_check(self, delay_s: float | None) -> None:
        if self._check_handle is not None:
            self._check_handle.cancel()
            self._check_handle = None
        if delay_s is not None:
            self._check_handle = self.host.loop.call_later(delay_s + 0.01, self._check_resources)

    def _check_resources(self) -> None:
        """The slots changed (or a timer ran out): act as the state says."""
        state = self.state
        if isinstance(state, st.WaitingForResources) and self._wait is not None:
            vertices = self._vertex_slots()
            slots = self._slots()
            verdict = self._wait.verdict(slots, minimum_slots(vertices), desired_slots(vertices))
            if verdict == "run":
                self._arm_check(None)
                self.host.spawn(self._create_execution(self._wait_restored_status()))
            elif verdict == "fail":
                need = minimum_slots(vertices)
                err = NoResourceAvailableError(
                    f"job {self.job_id} '{self.job_graph.job_name}' did not get the slots of its minimum parallelism within "
                    f"jobmanager.adaptive-scheduler.resource-wait-timeout ({self.wait_timeout_s:.0f}s): it needs {need} slot(s) "
                    f"and has {slots}. Give the cluster more TaskManagers/slots or lower the lower bounds"
                )
                self._fail(m.ErrorInfo.from_exception(err))
            else:
                self._arm_check(self._wait.next_check(slots, minimum_slots(vertices)))
        elif isinstance(state, st.Executing):
            if self._requirements_pending:  # slots for new requirements: they do not wait for the cooldown
                self._consider_rescale(forced=True, cause="resource requirements changed")
            else:
                self._consider_rescale(forced=False, cause=f"slots changed ({self._slots()} held)")

    def _wait_restored_status(self) -> JobStatus:
        return self.state.job_status

    def _wait_for_resources(self, after_restart: bool) -> None:
        self._to(st.WaitingForResources(after_restart))
        self._wait = ResourceWait(self.clock, self.wait_timeout_s, self.stabilization_s)
        self._check_resources()

    # --- executions ----------------------------------------------------------------------------------
    async def _create_execution(self, job_status: JobStatus, cause: str = "start") -> None:
        if not isinstance(self.state, (st.WaitingForResources, st.Restarting)):
            return
        self._to(st.CreatingExecutionGraph(job_status))
        parallelism = self._decide(self._slots())
        if parallelism is None:
            self._wait_for_resources(after_restart=True)
            return
        graph = self._graph_at(parallelism)
        restore = self._restorable
        host = _ExecutionHost(self)
        execution = DefaultScheduler(
            host, graph, self.clock, restore_from=restore, first_checkpoint_id=self._last_checkpoint_id + 1, amend_failure_causes=False,
        )
        previous = dict(self.parallelism)
        self.execution, self._execution_host, self.parallelism = execution, host, parallelism
        self._wait = None
        self._log(logging.INFO, "running at parallelism %s on %d slot(s)%s", self._describe(parallelism), self._slots(),
                  f", from checkpoint {restore.checkpoint_id}" if restore is not None else "")
        started_at = self.clock()
        event = None
        if previous and previous != parallelism:
            event = m.RescaleEvent(
                timestamp_ms=int(started_at * 1000), from_parallelism=self._by_name(previous), to_parallelism=self._by_name(parallelism), cause=cause,
            )
            self.rescales.append(event)
        self._to(st.Executing())
        self.rescales_manager.executing_started()
        await execution.start()
        if execution.status.state is JobStatus.RUNNING:  # else it failed at once: _execution_ended handles it
            self.host.spawn(self._watch_running(execution, event))

    async def _watch_running(self, execution: DefaultScheduler, event: m.RescaleEvent | None) -> None:
        """Once every task of `execution` runs: a rescale's downtime is known (its trigger -> now), and
        slot changes that arrived meanwhile are looked at (no rescale cancels an execution still deploying)."""
        trigger = self._rescale_triggered_at if self._rescale_triggered_at is not None else (event.timestamp_ms / 1000.0 if event else 0.0)
        while self.execution is execution and not execution.all_tasks_running():
            if execution.status.state.is_terminal:
                return
            await asyncio.sleep(0.01)
        if self.execution is not execution:
            return
        if event is not None:
            i = self.rescales.index(event)
            self.rescales[i] = event.model_copy(update={"downtime_ms": int((self.clock() - trigger) * 1000)})
            self._log(logging.INFO, "rescaled %s -> %s (%s) in %.2fs", event.from_parallelism, event.to_parallelism, event.cause,
                      self.clock() - trigger)
        self._check_resources()

    def _graph_at(self, parallelism: dict[str, int]) -> JobGraph:
        graph = self.job_graph.model_copy(deep=True)
        for jv in graph.vertices:
            jv.parallelism = parallelism[jv.id]
        # the execution does not restart itself: this scheduler restarts the job, at the parallelism the slots allow
        graph.config = {**graph.config, "restart-strategy.type": "none"}
        if self._restorable is not None or self.num_restarts or self.rescales:
            graph.config.pop(checkpointing_options.SAVEPOINT_PATH.key, None)  # restored from `restore_from` instead
        return graph

    def _by_name(self, parallelism: dict[str, int]) -> dict[str, int]:
        names = {jv.id: jv.name for jv in self.job_graph.vertices}
        return {names[v]: p for v, p in parallelism.items()}

    def _describe(self, parallelism: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in self._by_name(parallelism).items())

    def _consider_rescale(self, forced: bool, cause: str) -> None:
        if not isinstance(self.state, st.Executing) or self.execution is None:
            return
        if not forced and not self.execution.all_tasks_running():
            return  # still deploying: _watch_running looks again once every task runs
        proposed = self._decide(self._slots())
        decision = self.rescales_manager.decide(self.parallelism, proposed, forced=forced)
        if decision.retry_at is not None:
            self._arm_check(max(0.0, decision.retry_at - self.clock()))
        if not decision.rescale:
            self._log(logging.DEBUG, "no rescale: %s", decision.why)
            return
        self._rescale_triggered_at = self.clock()
        self._requirements_pending = self._requirements_pending and proposed != self._decide(desired_slots(self._vertex_slots()))
        self._log(logging.INFO, "rescaling %s -> %s: %s", self._describe(self.parallelism), self._describe(proposed or {}), cause)
        self._to(st.Restarting(cause, 0.0, rescale=True))
        self.host.spawn(self._restart(cause, 0.0, checkpoint_first=True))

    async def _restart(self, cause: str, backoff_s: float, checkpoint_first: bool) -> None:
        """End the current execution (a checkpoint first, for a rescale), wait the back-off, start the next."""
        execution, host = self.execution, self._execution_host
        if execution is not None and host is not None:
            if checkpoint_first:
                await self._checkpoint_before_rescale(execution)
            if not execution.status.state.is_terminal:
                execution.cancel()
            await host.ended
            self._collect_restorable(execution)
            await self._newest_in_store()
        if backoff_s > 0:
            await asyncio.sleep(backoff_s)
        if not isinstance(self.state, st.Restarting):
            return
        self.execution = None
        self._wait = ResourceWait(self.clock, self.wait_timeout_s, 0.0)  # the slots are there already: no stabilisation wait
        self.host.spawn(self._redeclare())
        if self._decide(self._slots()) is None:
            self._wait_for_resources(after_restart=True)
            return
        await self._create_execution(JobStatus.RESTARTING, cause)

    async def _checkpoint_before_rescale(self, execution: DefaultScheduler) -> None:
        """A checkpoint now, so the next execution replays as little as possible (else the newest one counts)."""
        cc = execution.checkpoints
        if cc is None:
            return
        if not execution.all_tasks_running():
            await cc.settle()
            return
        try:
            cid = await cc.trigger_checkpoint()
        except CheckpointError:
            cid = None
        if cid is None and cc.pending is not None and not cc.pending.discarded:
            cid = cc.pending.checkpoint_id  # one is in flight: it is as good as a new one (cancelling would throw it away)
        if cid is None:
            await cc.settle()
            return
        deadline = self.clock() + RESCALE_CHECKPOINT_TIMEOUT_S
        while self.clock() < deadline:
            latest = cc.latest_completed
            if latest is not None and latest.checkpoint_id >= cid:
                break
            if cc.pending is None or cc.pending.checkpoint_id != cid:
                break  # aborted: the newest completed checkpoint counts
            await asyncio.sleep(0.01)
        # its sinks' commits (the Delta sink's) finish in this execution, not after its cancel
        await cc.settle()

    def _collect_restorable(self, execution: DefaultScheduler) -> None:
        """Where the next execution starts: the newest checkpoint or savepoint of this one (or before)."""
        cc: CheckpointCoordinator | None = execution.checkpoints
        if cc is None:
            return
        self._last_checkpoint_id = max(self._last_checkpoint_id, cc.next_checkpoint_id - 1)
        for candidate in (cc.latest_completed, cc.latest_savepoint):
            if candidate is not None and (self._restorable is None or candidate.checkpoint_id > self._restorable.checkpoint_id):
                self._restorable = candidate

    async def _newest_in_store(self) -> None:
        """Delta is the truth for checkpoints: a commit that landed but whose reply was lost counts."""
        if not self.checkpoint_config.enabled:
            return
        from runtime.jobmanager.checkpoint.store import CompletedCheckpointStore

        store = CompletedCheckpointStore(self.job_id, self.checkpoint_config.table_uri, self.checkpoint_config.num_retained)
        try:
            latest = await self.host.loop.run_in_executor(None, store.latest)
        except Exception as e:  # noqa: BLE001 - unreadable now: the newest the executions reported counts
            self._log(logging.WARNING, "could not read the checkpoint table for the newest checkpoint: %s", e)
            return
        if latest is not None and (self._restorable is None or latest.checkpoint_id > self._restorable.checkpoint_id):
            self._restorable = latest
            self._last_checkpoint_id = max(self._last_checkpoint_id, latest.checkpoint_id)

    def _execution_ended(self, host: _ExecutionHost, result: m.JobResultMessage) -> None:
        """An execution reached a terminal status: the job ends with it, or restarts."""
        if host is not self._execution_host or self.execution is None:
            return
        execution = self.execution
        state = self.state
        if isinstance(state, st.Restarting):
            return  # cancelled on purpose: _restart goes on
        self._collect_restorable(execution)
        if result.status is JobStatus.FINISHED:
            self._finish(JobStatus.FINISHED, result)
        elif isinstance(state, st.Canceling) or (result.status is JobStatus.CANCELED and isinstance(state, st.StopWithSavepoint)):
            self._finish(JobStatus.CANCELED, result)
        elif isinstance(state, st.Failing):
            self._finish(JobStatus.FAILED, result)
        else:
            cause = result.error or m.ErrorInfo(type_name="ExecutionEnded", message=f"the execution ended {result.status.value}")
            self._on_failure(cause)

    def _on_failure(self, cause: m.ErrorInfo) -> None:
        """The execution failed: restart the job (the restart strategy decides), or fail it."""
        if cause.is_non_recoverable:
            cause = cause.model_copy(update={"message": f"{cause.message} (a non-recoverable error: the job is not restarted)"})
            self._record(cause, 0)
            self._fail(cause)
            return
        self.restart_strategy.notify_failure(cause, int(self.clock() * 1000))
        if not self.restart_strategy.can_restart():
            cause = cause.model_copy(update={
                "message": f"{cause.message} (restart strategy {self.restart_strategy.describe()} exhausted after {self.num_restarts} restarts)"
            })
            self._record(cause, 0)
            self._fail(cause)
            return
        self._record(cause, sum(self.parallelism.values()))
        self.num_restarts += 1
        self._rescale_triggered_at = self.clock()  # a parallelism change of the restart counts its downtime from here
        backoff = self.restart_strategy.backoff_time_ms() / 1000.0
        self._log(logging.WARNING, "restarting the job in %.2fs after: %s", backoff, cause.describe())
        self._to(st.Restarting(cause.describe(), backoff, rescale=False))
        self.host.spawn(self._restart(f"restart after {cause.type_name}", backoff, checkpoint_first=False))

    def _record(self, cause: m.ErrorInfo, restarted: int) -> None:
        self.exception_history.append(views.ExceptionView(int(self.clock() * 1000), cause, restarted, True))
        del self.exception_history[:-100]

    def _fail(self, cause: m.ErrorInfo) -> None:
        self.failure = cause
        self._log(logging.ERROR, "job fails: %s", cause.describe())
        execution = self.execution
        if execution is not None and not execution.status.state.is_terminal and self.state.has_execution:
            self._to(st.Failing())
            execution.cancel()
            return
        self._finish(JobStatus.FAILED, None)

    def _finish(self, status: JobStatus, result: m.JobResultMessage | None) -> None:
        if isinstance(self.state, st.Finished):
            return
        self._arm_check(None)
        if status is JobStatus.FAILED and self.failure is None and result is not None:
            self.failure = result.error
        self.end_time = self.clock()
        if status is JobStatus.FAILED and self.status.state not in (JobStatus.FAILING,):
            self._set_status(JobStatus.FAILING)
        if status is JobStatus.CANCELED and self.status.state is not JobStatus.CANCELLING:
            self._set_status(JobStatus.CANCELLING)
        self._to(st.Finished(status))
        self._final_result = result
        self.archived = self.job_details()
        self.host.spawn(self.host.release_resources())
        self.host.job_reached_terminal(self.result())

    def suspend(self, cause: str) -> None:
        """Leadership lost: the execution is suspended (nothing committed, nothing deleted) and so is the job."""
        if self.state.job_status.is_terminal:
            return
        self._log(logging.WARNING, "suspending the job: %s", cause)
        execution, self._execution_host = self.execution, None  # its end is not a failure to restart from
        if execution is not None:
            execution.suspend(cause)
        self._finish(JobStatus.SUSPENDED, None)

    def cancel(self) -> m.Ack:
        if self.state.job_status.is_terminal:
            return m.Ack()
        execution = self.execution
        if execution is not None and self.state.has_execution and not execution.status.state.is_terminal:
            ack = execution.cancel()  # its end (_execution_ended) finishes the job CANCELED
            if not ack.ok:
                return ack
            if not isinstance(self.state, st.Canceling):
                self._to(st.Canceling())
            return m.Ack()
        # no execution runs (waiting for slots, or between two executions): nothing to wait for
        self._finish(JobStatus.CANCELED, None)
        return m.Ack()

    # --- resource requirements (Flink 1.18: /jobs/:jobid/resource-requirements) ---------------------------
    def job_resource_requirements(self) -> dict[str, VertexParallelismBounds]:
        return dict(self.requirements)

    def update_resource_requirements(self, requirements: dict[str, VertexParallelismBounds]) -> None:
        """New per-vertex bounds (validated by the caller against the graph); the job follows at once."""
        self.requirements.update(requirements)
        self._requirements_pending = True  # until the job runs at what they allow, their rescales are forced
        self._log(logging.INFO, "resource requirements changed: %s",
                  ", ".join(f"{v} {b.lower_bound}..{b.upper_bound}" for v, b in requirements.items()))
        self.host.spawn(self._redeclare())
        if isinstance(self.state, st.Executing):
            current_ok = all(self.requirements[v].lower_bound <= p <= self.requirements[v].upper_bound for v, p in self.parallelism.items())
            self._consider_rescale(forced=not current_ok or self._decide(self._slots()) != self.parallelism,
                                   cause="resource requirements changed")
        else:
            self._check_resources()

    # --- tasks, checkpoints, savepoints, coordinators: the current execution's ---------------------------
    def _current(self, what: str) -> DefaultScheduler:
        if self.execution is None or not self.state.has_execution:
            raise CheckpointError(f"job {self.job_id} is {self.state.name}: {what} needs a running execution")
        return self.execution

    def update_task_execution_state(self, msg: m.TaskExecutionStateUpdate) -> m.Ack:
        if self.execution is None:
            return m.Ack(ok=False, message="no execution")
        return self.execution.update_task_execution_state(msg)

    def source_reached_end_of_input(self, attempt_id: str) -> m.Ack:
        if self.execution is None:
            return m.Ack(ok=False, message="no execution")
        return self.execution.source_reached_end_of_input(attempt_id)

    @property
    def checkpoints(self) -> CheckpointCoordinator | None:
        return self.execution.checkpoints if self.execution is not None else None

    @property
    def coordinators(self) -> OperatorCoordinators:
        return self.execution.coordinators if self.execution is not None else OperatorCoordinators()

    @property
    def eg(self) -> ExecutionGraph:
        return self.execution.eg if self.execution is not None else ExecutionGraph(self._graph_at(self.parallelism or {
            jv.id: jv.parallelism for jv in self.job_graph.vertices}))

    async def trigger_checkpoint(self) -> int | None:
        return await self._current("a checkpoint").trigger_checkpoint()

    async def acknowledge_checkpoint(self, msg: m.AcknowledgeCheckpoint) -> m.Ack:
        if self.execution is None:
            return m.Ack(ok=False, message="no execution")
        return await self.execution.acknowledge_checkpoint(msg)

    async def decline_checkpoint(self, msg: m.DeclineCheckpoint) -> m.Ack:
        if self.execution is None:
            return m.Ack()
        return await self.execution.decline_checkpoint(msg)

    async def trigger_savepoint(self, target_directory: str | None, stop: bool, drain: bool) -> m.SavepointLocation:
        if not isinstance(self.state, st.Executing):
            raise CheckpointError(f"job {self.job_id} is {self.state.name}: savepoints need a running job")
        execution = self._current("a savepoint")
        if not stop:
            return await execution.trigger_savepoint(target_directory, stop, drain)
        self._to(st.StopWithSavepoint())
        try:
            return await execution.trigger_savepoint(target_directory, stop, drain)
        except Exception:
            if isinstance(self.state, st.StopWithSavepoint) and execution.status.state is JobStatus.RUNNING:
                self._to(st.Executing())
            raise

    def deliver_operator_event(self, node_id: int, subtask: int, attempt: int, event: Any) -> m.Ack:
        if self.execution is None:
            return m.Ack(ok=False, message="no execution")
        return self.execution.deliver_operator_event(node_id, subtask, attempt, event)

    def deliver_coordination_request(self, node_id: int, request: Any) -> Any:
        return self._current("a coordination request").deliver_coordination_request(node_id, request)

    async def refresh_task_metrics(self, timeout_s: float = 2.0) -> None:
        if self.execution is not None:
            await self.execution.refresh_task_metrics(timeout_s)

    # --- views -------------------------------------------------------------------------------------
    def snapshot(self) -> views.JobSnapshot:
        common: dict[str, Any] = dict(
            exceptions=tuple(self.exception_history), num_restarts=self.num_restarts, restart_strategy=self.restart_strategy.describe(),
            scheduler="reactive" if self.reactive else "adaptive", scheduler_state=self.state.name, rescales=tuple(self.rescales),
        )
        execution = self.execution
        if execution is None:
            return views.JobSnapshot(
                job_id=self.job_id, job_name=self.job_graph.job_name, status=self.status.state, start_time=self.start_time,
                end_time=self.end_time, now=self.clock(), failure=self.failure, vertices=(), **common,
            )
        snap = execution.snapshot()
        accumulators = dict(snap.accumulators)
        return views.JobSnapshot(
            job_id=self.job_id, job_name=self.job_graph.job_name, status=self.status.state, start_time=self.start_time,
            end_time=self.end_time, now=self.clock(), failure=self.failure, vertices=snap.vertices, regions=snap.regions,
            accumulators=accumulators, **common,
        )

    def job_details(self) -> m.JobDetailsMessage:
        return views.job_details(self.snapshot())

    def exceptions(self) -> m.JobExceptionsMessage:
        return views.exceptions(self.snapshot())

    def checkpoint_statistics(self) -> m.CheckpointStatisticsMessage:
        if self.execution is None:
            return m.CheckpointStatisticsMessage(job_id=self.job_id, enabled=self.checkpoint_config.enabled)
        return self.execution.checkpoint_statistics()

    def result(self) -> m.JobResultMessage:
        snap = self.snapshot()
        final = getattr(self, "_final_result", None)
        out = views.job_result(snap)
        if final is not None and final.accumulators_pickle:
            accumulators = pickle.loads(final.accumulators_pickle)
            if self.num_restarts:
                accumulators["restarts"] = self.num_restarts
            if self.rescales:
                accumulators["rescales"] = len(self.rescales)
            out = out.model_copy(update={"accumulators_pickle": cloudpickle.dumps(accumulators)})
        return out


def validate_requirements(job_graph: JobGraph, requirements: dict[str, VertexParallelismBounds]) -> list[str]:
    """What is wrong with new resource requirements (empty: nothing), each problem naming its vertex."""
    problems = []
    vertices = {jv.id: jv for jv in job_graph.vertices}
    for vid, bounds in requirements.items():
        jv = vertices.get(vid)
        if jv is None:
            problems.append(f"unknown vertex {vid!r} (the job's vertices: {', '.join(sorted(vertices))})")
        elif bounds.upper_bound > jv.max_parallelism:
            problems.append(f"vertex {vid!r} ('{jv.name}'): upper bound {bounds.upper_bound} is above its max parallelism {jv.max_parallelism}")
    return problems


__all__ = ["AdaptiveScheduler", "validate_requirements"]
