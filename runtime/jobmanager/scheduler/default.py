"""The default scheduler (Flink: DefaultScheduler): fixed parallelism, region failover, batch.

A SchedulerNG (`ng.py`) composed of a scheduling strategy (what to deploy when), an execution slot
allocator (slot-sharing placement for any subset, keeping survivors' slots), a failure handler
(`failure_handler.py`: restart or fail, and which tasks), the operator coordinators
(`coordinators.py`), the termination states (`termination.py`), the speculative execution handler
and the CheckpointCoordinator. It owns the ExecutionGraph and the job status; the JobMaster is its
SchedulerHost (main thread, gateways, listeners). Everything here runs on the main thread; the
views are pure functions of a snapshot (`views.py`).

Failover: a failed task's restart set comes from the failover strategy; its running tasks are
cancelled (cancellations the scheduler makes itself never count as failures), and after the
back-off the set gets new attempts that restore from the latest completed checkpoint. A global
restart (every task) moves the job RUNNING -> RESTARTING -> RUNNING; a region restart keeps it
RUNNING, as in Flink.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runtime.core.errors import (
    CheckpointError,
    InvalidProgramError,
    LeadershipLostError,
    MillraceError,
    NoResourceAvailableError,
    StopWithSavepointStoppingError,
    ThrowableType,
)
from runtime.core.options import checkpointing as checkpointing_options
from runtime.core.options import jobmanager as jobmanager_options
from runtime.core.state_machine import StateMachine
from runtime.core.states import ExecutionState, JobStatus, job_status_machine
from runtime.graph.execution_graph import Execution, ExecutionGraph, ExecutionVertex, ExecutionVertexID
from runtime.graph.job_graph import JobGraph, JobType, ResultPartitionType
from runtime.jobmanager.checkpoint.config import CheckpointCoordinatorConfiguration
from runtime.jobmanager.checkpoint.coordinator import CheckpointCoordinator, CheckpointTask
from runtime.jobmanager.deployment import build_tdd
from runtime.jobmanager.scheduler import views
from runtime.jobmanager.scheduler.adaptive_batch import AdaptiveBatchDecider
from runtime.jobmanager.scheduler.coordinators import CoordinatorServices, OperatorCoordinators
from runtime.jobmanager.scheduler.failover import failover_strategy_from_config, restart_strategy_from_config
from runtime.jobmanager.scheduler.failure_handler import ExecutionFailureHandler, FailureHandlingResult, is_consequence
from runtime.jobmanager.scheduler.partition_tracker import BlockingPartitionTracker
from runtime.jobmanager.scheduler.slot_allocator import ExecutionSlotAllocator
from runtime.jobmanager.scheduler.slot_sharing import least_resource_requirements
from runtime.jobmanager.scheduler.speculative_handler import SpeculativeExecutionHandler
from runtime.jobmanager.scheduler.strategy import EagerSchedulingStrategy, PipelinedRegionSchedulingStrategy, SchedulingStrategy
from runtime.jobmanager.scheduler.termination import Termination, termination_machine
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m
from runtime.rpc.deployment import TaskRestore

if TYPE_CHECKING:
    from runtime.jobmanager.scheduler.ng import SchedulerHost

log = logging.getLogger(__name__)

DEFAULT_SLOT_REQUEST_TIMEOUT_S = jobmanager_options.DEFAULT_SLOT_REQUEST_TIMEOUT_S
FINAL_SAVEPOINT_ATTEMPTS = 3  # execution.end-of-input.savepoint: tries before the job fails


@dataclass
class ExceptionHistoryEntry:
    """One failure the scheduler handled (Flink: RootExceptionHistoryEntry)."""

    timestamp_ms: int
    error: m.ErrorInfo
    restarted_tasks: int
    global_failure: bool
    concurrent: list[m.ErrorInfo] = field(default_factory=list)


class DefaultScheduler:
    name = "default"

    def __init__(
        self, host: SchedulerHost, job_graph: JobGraph, clock: Callable[[], float] = time.time, *,
        restore_from: Any = None, first_checkpoint_id: int = 1, amend_failure_causes: bool = True,
    ) -> None:
        """`restore_from`: a completed checkpoint or savepoint to start from instead of
        `execution.savepoint.path`, and `first_checkpoint_id` the least id of the next checkpoint
        (an adaptive scheduler's execution at a new parallelism); `amend_failure_causes` False: a
        failure's cause is reported as it is, without the restart strategy's verdict (that
        scheduler restarts, not this one)."""
        self.host = host
        self._restore_from = restore_from
        self._first_checkpoint_id = first_checkpoint_id
        self.job_graph = job_graph
        self.job_id = job_graph.job_id
        self.clock = clock
        self.eg = ExecutionGraph(job_graph)
        self.status: StateMachine[JobStatus] = job_status_machine(self.job_id)
        self.slot_pool: SlotPool = host.slot_pool
        # blocking exchanges (batch): results go to Delta, regions are scheduled lazily from the
        # sources and reuse the slots of regions that ended
        has_blocking = any(r.result_type is ResultPartitionType.BLOCKING for r in self.eg.results.values())
        self.partitions: BlockingPartitionTracker | None = None
        self.strategy: SchedulingStrategy = EagerSchedulingStrategy(self.eg)
        if has_blocking:
            from runtime.storage.blocking_results import job_results_dir  # pyarrow only

            self.partitions = BlockingPartitionTracker(self.eg, job_results_dir(job_graph.config, self.job_id))
            self.strategy = PipelinedRegionSchedulingStrategy(self.eg, self.partitions.is_committed)
        self.allocator = ExecutionSlotAllocator(self.eg, self.slot_pool, reuse_slots=has_blocking)
        # adaptive batch: vertices whose parallelism is decided from their inputs' bytes
        self.adaptive: AdaptiveBatchDecider | None = (
            AdaptiveBatchDecider(self.eg, self.partitions, job_graph.config) if self.partitions is not None else None
        )
        # a lazily scheduled job runs with fewer slots than its parallelism (min_count)
        self.resource_requirements = least_resource_requirements(job_graph)
        self.slots_needed = sum(r.count for r in self.resource_requirements)
        self.slot_timeout_s = jobmanager_options.SLOT_REQUEST_TIMEOUT.get(job_graph.config)
        self.checkpoint_config = CheckpointCoordinatorConfiguration.from_config(job_graph.config, self.job_id)
        self.failover_strategy = failover_strategy_from_config(
            job_graph.config, self._blocking_partition_available if self.partitions is not None else None
        )
        self.restart_strategy = restart_strategy_from_config(
            job_graph.config, self.checkpoint_config.enabled, clock=clock, batch=job_graph.job_type is JobType.BATCH
        )
        self.failure_handler = ExecutionFailureHandler(
            self.eg, self.failover_strategy, self.restart_strategy, clock, lambda: self.num_restarts,
            say_exhausted=amend_failure_causes and (self.checkpoint_config.enabled or self.restart_strategy.describe() != "none"),
        )
        self.checkpoints: CheckpointCoordinator | None = None
        self.coordinators = OperatorCoordinators()
        self.by_attempt: dict[str, ExecutionVertex] = {}
        self.placement: dict[ExecutionVertexID, PhysicalSlot] = {}
        self.metrics: dict[str, m.TaskMetricsSnapshot] = {}
        self.backpressure: dict[str, tuple[int, float]] = {}
        self.busy: dict[str, float] = {}  # attempt id -> busy ratio of the last metrics interval
        self.failure: m.ErrorInfo | None = None
        self.accumulators: dict[str, Any] = {}
        self.exception_history: list[ExceptionHistoryEntry] = []
        self.num_restarts = 0
        self.start_time = clock()
        self.end_time: float | None = None
        self.deployed = False  # the first deployment happened
        self.termination = termination_machine(self.job_id)
        self._sources_at_end: set[str] = set()  # attempts of sources whose input ended (end-of-input savepoint)
        # (checkpoint or savepoint id, error) of the newest failed operator-coordinator commit: a
        # stop-with-savepoint whose commit failed did not stop the job (it fails over instead)
        self._failed_commit: tuple[int, m.ErrorInfo] | None = None
        self._waiting: list[ExecutionVertexID] = []  # scheduled, waiting for slots
        self._waiting_since = 0
        self._pending_restart: set[ExecutionVertexID] = set()
        self._restart_generation = 0
        self._restored_checkpoint: Any = None
        self.archived: m.JobDetailsMessage | None = None
        # speculative execution (batch): slow subtasks get another attempt elsewhere, the first to finish wins
        self.speculation = SpeculativeExecutionHandler(self)

    @property
    def finishing(self) -> bool:
        """Every task finished and the final commit runs, or a stop-with-savepoint is ending the tasks:
        cancels are refused, failures and TaskManager losses no longer matter."""
        return self.termination.state in (Termination.FINISHING, Termination.STOPPING)

    @property
    def stopping(self) -> bool:
        return self.termination.state is Termination.STOPPING

    def _blocking_partition_available(self, partition_id: str) -> bool:
        """Region failover's view (Flink: the partition tracker's): a blocking partition is there if it is
        committed, or its producer will still produce it (not started yet, running, or finished with its
        commit in flight); only a failed or cancelled producer's partition must be produced again."""
        assert self.partitions is not None
        if self.partitions.is_committed(partition_id):
            return True
        producer = self.eg.vertex(self.eg.partition(partition_id).producer).execution_state
        return producer not in (ExecutionState.FAILED, ExecutionState.CANCELED, ExecutionState.CANCELING)

    def _log(self, level: int, msg: str, *args: Any) -> None:
        log.log(level, f"[JobMaster {self.job_id} '{self.job_graph.job_name}'] {msg}", *args)

    def _set_status(self, to: JobStatus) -> None:
        self.status.transition(to)
        self._log(logging.INFO, "job status -> %s", to.name)
        self.host.status_changed(to, self.failure.describe() if self.failure and to in (JobStatus.FAILING, JobStatus.FAILED) else None)

    # --- start ----------------------------------------------------------------------------------
    async def start(self) -> None:
        if self.status.state is not JobStatus.CREATED:
            return  # cancelled before it started
        try:
            self._start_coordinators()
            if self.checkpoint_config.enabled or self.job_graph.job_type is JobType.STREAMING:
                # streaming jobs always get a coordinator: savepoints need it even without periodic checkpoints
                from runtime.jobmanager.checkpoint.store import CompletedCheckpointStore  # storage: only when checkpointing

                store = CompletedCheckpointStore(self.job_id, self.checkpoint_config.table_uri, self.checkpoint_config.num_retained)
                self.checkpoints = CheckpointCoordinator(
                    self.job_id, self.checkpoint_config, store, _CheckpointHost(self), self.clock, fence=self.host.confirm_leadership,
                )
            await self._restore_savepoint()
            if self.host.recovered and self.partitions is not None:
                await self._recover_blocking_results()
        except Exception as e:  # e.g. the sink's module cannot be imported here
            info = m.ErrorInfo.from_exception(e, operator=getattr(e, "__millrace_operator__", None))
            if isinstance(e, MillraceError):
                # refused on purpose (a savepoint that does not fit the program, a path that is no
                # savepoint): the message says what and why; the trace stays in this log, not in the
                # user's view, where it would read as a crash of some task
                log.debug("job %s: start refused", self.job_id, exc_info=True)
                info = info.model_copy(update={"traceback": ""})
            self._fail_job(info)
            return
        self._set_status(JobStatus.RUNNING)
        self._log(logging.INFO, "requesting %d slots: %s", self.slots_needed, "; ".join(r.describe() for r in self.resource_requirements))
        self._schedule(self.strategy.start_scheduling())
        self.speculation.start()
        try:
            await self.declare_slots(self.slots_needed)
        except Exception as e:  # noqa: BLE001 - whatever keeps the job from its slots fails the job, with its cause
            self._fail_job(m.ErrorInfo.from_exception(e))

    async def declare_slots(self, slots: int) -> None:
        """Declare the job's requirements at the ResourceManager (any slots > 0: all of them; 0 clears)."""
        requirements = self.resource_requirements if slots > 0 else []
        extra = self.speculation.extra_slots
        if requirements and extra:  # speculative attempts need slots beyond the job's own
            requirements = [requirements[0].model_copy(update={"count": requirements[0].count + extra}), *requirements[1:]]
        ack: m.Ack = await self.host.rm.declare_required_resources(
            m.ResourceRequirements(
                job_id=self.job_id, job_master_endpoint=self.host.endpoint_id, job_name=self.job_graph.job_name, requirements=requirements,
                job_master_token=self.host.fencing_token,
            )
        )
        if not ack.ok:
            raise NoResourceAvailableError(ack.message)

    async def _restore_savepoint(self) -> None:
        """`execution.savepoint.path` (run -s): validate the savepoint against this program, then
        restore every task and operator coordinator from it (Flink: StateAssignmentOperation)."""
        if self.checkpoints is not None:
            self.checkpoints.continue_after(self._first_checkpoint_id - 1)
        path = checkpointing_options.SAVEPOINT_PATH.get(self.job_graph.config)
        recovered = None
        if self._restore_from is None and self.host.recovered and self.checkpoints is not None:
            # a new leader recovers the job: from its newest completed checkpoint (Delta is the
            # truth: one committed just before the old leader died counts), else as submitted
            recovered = await self.checkpoints.latest_for_restore()
        if self._restore_from is not None:
            sp, path = self._restore_from, getattr(self._restore_from, "location", None) or "the latest checkpoint"
        elif recovered is not None:
            sp, path = recovered, "the job's checkpoints (recovered by a new leader)"
        elif not path:
            return
        else:
            from runtime.storage.savepoints import read_savepoint

            sp = await self._run_io(read_savepoint, path)
        allow_non_restored = checkpointing_options.SAVEPOINT_IGNORE_UNCLAIMED_STATE.get(self.job_graph.config)
        ops = {op.operator_id: (op, jv) for jv in self.job_graph.vertices for op in jv.operators}
        with_state = set(sp.operator_files) | {op for op, c in sp.committables.items() if c} | set(sp.coordinator_states)
        for op_id in sorted(with_state - set(ops)):
            if not allow_non_restored:
                raise InvalidProgramError(
                    f"cannot restore savepoint {path}: it holds state of operator {op_id!r}, which is not in this program "
                    f"(give the operator its old uid, or pass --allow-non-restored-state to drop that state)"
                )
            self._log(logging.WARNING, "savepoint %s: state of operator %r is not restored (not in this program)", path, op_id)
        for op_id in sorted(with_state & set(ops)):
            old = sp.max_parallelism.get(op_id)
            op, jv = ops[op_id]
            if old is not None and old != jv.max_parallelism:
                raise InvalidProgramError(
                    f"cannot restore savepoint {path}: operator '{op.name}' ({op_id!r}) was written with max parallelism {old}, "
                    f"this program has {jv.max_parallelism}; keyed state cannot move to another number of key groups"
                )
        for op_id, subtasks in sorted(sp.finished_subtasks.items()):
            if op_id not in ops:
                continue
            op, jv = ops[op_id]
            was = sp.parallelism.get(op_id)
            fully = len(subtasks) == was
            if was != jv.parallelism and (not fully or sp.committables.get(op_id)):
                # FLIP-147: which subtasks finished (and the final committables they hold) are per
                # subtask; only a fully finished operator without committables fits any parallelism
                raise InvalidProgramError(
                    f"cannot restore savepoint {path}: operator '{op.name}' ({op_id!r}) had "
                    f"{'finished' if fully else f'finished in subtasks {subtasks} of {was}'} when the savepoint was taken, "
                    f"at parallelism {was}; restore it at parallelism {was} (this program has {jv.parallelism})"
                )
        self._restored_checkpoint = sp
        if self.checkpoints is not None:
            self.checkpoints.restore_from_savepoint(sp)
        self._log(logging.INFO, "restoring %s %d from %s", "savepoint" if sp.is_savepoint else "checkpoint", sp.checkpoint_id, path)
        everything = {v.id for v in self.eg.all_vertices()}
        await self._reset_coordinators(everything)

    async def _recover_blocking_results(self) -> None:
        """A new leader recovers a batch job (Flink 1.20's batch job recovery, FLIP-383): the blocking
        results committed before the failover are in Delta and are kept; a region whose whole output
        is there is FINISHED without being deployed (its attempt stays, no new one), and the strategy
        schedules its consumers. A region only partly there runs again whole: the strategy schedules
        regions, and its partitions committed before keep their files (`commit` drops the re-run's)."""
        assert self.partitions is not None
        committed, lost = await self.partitions.recover(self.host.loop)
        finished = self.partitions.finished_regions()
        for region in finished:
            for vid in region.vertices:
                self.eg.vertex(vid).current_execution.recover_as_finished()
        self._log(
            logging.INFO, "recovered %d committed blocking partitions (%d lost); %d of %d regions FINISHED without running again",
            len(committed), len(lost), len(finished), len(self.eg.regions),
        )
        self._decide_parallelism()

    def _start_coordinators(self) -> None:
        services = CoordinatorServices(self.host.loop, self._deliver_to_task)
        self.coordinators.start_all(self.job_graph, self._current_parallelism, self._coordinator_failed_job, services)

    async def _deliver_to_task(self, vertex_id: str, subtask: int, attempt: int, node_id: int, payload: bytes) -> bool:
        """An operator coordinator's event for one attempt (CoordinatorServices.deliver): sent to its
        TaskManager if that attempt is the subtask's current one and runs; else dropped."""
        ev = self.eg.vertex(ExecutionVertexID(vertex_id, subtask))
        # the current attempt or a speculative one beside it (each runs in a slot of its own)
        ex = next((e for e in ev.current_executions() if e.attempt_number == attempt), None)
        if ex is None:
            return False
        slot = self.placement.get(ev.id) if ex is ev.current_execution else ex.assigned_resource
        # INITIALIZING too: a reader registers while its chain opens, before the task reports RUNNING
        if ex.state not in _EVENT_STATES or not isinstance(slot, PhysicalSlot):
            return False
        msg = m.OperatorEventToTask(job_id=self.job_id, execution_attempt_id=ex.attempt_id, node_id=node_id, payload=payload)
        ack: m.Ack = await self.host.task_executor(slot.tm_id).send_operator_event_to_task(msg, timeout=10)
        return ack.ok

    def _current_parallelism(self, vertex_id: str) -> int:
        return self.eg.job_vertex(vertex_id).parallelism

    def _coordinator_failed_job(self, cause: BaseException, operator: str) -> None:
        """OperatorCoordinatorContext.fail_job: a global failover with the coordinator's cause."""
        if self.status.state is JobStatus.RUNNING and not self.finishing:
            self._handle_global_failure(m.ErrorInfo.from_exception(cause, operator=operator))

    # --- scheduling and deployment -----------------------------------------------------------------
    def _schedule(self, vertices: list[ExecutionVertexID]) -> None:
        if not vertices:
            return
        for vid in vertices:
            self.eg.vertex(vid).current_execution.transition_state(ExecutionState.SCHEDULED)
        self._waiting = [*self._waiting, *(v for v in vertices if v not in self._waiting)]
        self._arm_slot_timeout()
        self.try_deploy()

    def _arm_slot_timeout(self) -> None:
        """The waiting vertices fail the job if they get no slots within slot.request.timeout.s (from now)."""
        self._waiting_since += 1
        generation = self._waiting_since
        self.host.loop.call_later(self.slot_timeout_s, lambda: self.host.spawn(self._check_slot_timeout(generation)))

    def wants_slots(self) -> bool:
        return self.status.state in (JobStatus.RUNNING, JobStatus.RESTARTING) and (
            bool(self._waiting) or self.speculation.wants_slots() or len(self.slot_pool) < self.slots_needed + self.speculation.extra_slots
        )

    def try_deploy(self) -> None:
        self.speculation.try_deploy()
        if not self._waiting or self.status.state is not JobStatus.RUNNING:
            return
        placement: dict[ExecutionVertexID, PhysicalSlot] = {}
        for group in self.strategy.deployment_groups(self._waiting):  # each group gets all its slots or waits
            try:
                placement.update(self.allocator.allocate(group))
            except NoResourceAvailableError as e:
                # not enough slots (or not of the shapes the groups need) yet: wait for more offers,
                # for running regions to end (lazy scheduling), or for the timeout; a later group
                # may fit (e.g. one whose shared slot is still held)
                self._log(logging.INFO, "waiting for slots: %s", e)
        if not placement:
            return
        waiting = [v for v in self._waiting if v in placement]
        self._waiting = [v for v in self._waiting if v not in placement]
        if self._waiting:  # progress: the rest get a full timeout from now
            self._arm_slot_timeout()
        self.deployed = True
        for vid, slot in placement.items():
            ev = self.eg.vertex(vid)
            ex = ev.current_execution
            ex.assigned_resource = slot
            self.placement[vid] = slot
            self.by_attempt[ex.attempt_id] = ev
        self._log(logging.INFO, "deploying %d tasks to %d slots", len(waiting), len({s.allocation_id for s in placement.values()}))
        for vid in waiting:
            self.host.spawn(self._deploy(self.eg.vertex(vid)))

    def _task_restore(self, ev: ExecutionVertex) -> TaskRestore | None:
        cp = self._restored_checkpoint
        if cp is None:
            return None
        files = {}
        known = set(cp.parallelism) | set(cp.operator_files) | set(cp.committables)
        for op in ev.job_vertex.operators:
            op_id = op.operator_id
            if op_id in cp.operator_files:
                files[op_id] = list(cp.operator_files[op_id])
        return TaskRestore(
            checkpoint_id=cp.checkpoint_id, operator_files=files, state_dir=getattr(cp, "location", None),
            restored_operators=[op.operator_id for op in ev.job_vertex.operators if op.operator_id in known],
            deployed_as_finished=self._finished_in(cp, ev),
        )

    @staticmethod
    def _finished_in(cp: Any, ev: ExecutionVertex) -> bool:
        """FLIP-147: every operator of this subtask had finished in the checkpoint (Flink: a task
        deployed as finished), so it runs no operator again (a bounded source is not replayed). A
        fully finished operator is finished at any parallelism; a partly finished one by subtask
        (its parallelism cannot change: _restore_savepoint refuses that)."""
        finished = cp.finished_subtasks
        ops = [op.operator_id for op in ev.job_vertex.operators]
        if not ops or not finished:
            return False

        def done(op_id: str) -> bool:
            subtasks = finished.get(op_id)
            if not subtasks:
                return False
            if len(subtasks) == cp.parallelism.get(op_id):
                return True
            return ev.subtask_index in subtasks and cp.parallelism.get(op_id) == ev.parallelism

        return all(done(op) for op in ops)

    async def _deploy(self, ev: ExecutionVertex, speculative: Execution | None = None) -> None:
        ex = speculative or ev.current_execution
        if ex.state is not ExecutionState.SCHEDULED:
            return
        ex.transition_state(ExecutionState.DEPLOYING)
        slot = ex.assigned_resource if speculative is not None else self.placement[ev.id]
        assert isinstance(slot, PhysicalSlot), f"{ev.task_name_with_subtask} is deploying without a slot"
        tdd = build_tdd(self.eg, ev, self.placement, self.job_graph.config, self.partitions, execution=speculative)
        if self.checkpoints is not None:
            tdd.checkpoint_dir = self.checkpoint_config.table_uri
        tdd.task_restore = self._task_restore(ev)
        tdd.job_master_token = self.host.fencing_token
        te = self.host.task_executor(slot.tm_id)
        try:
            await te.submit_task(tdd, timeout=30)
        except Exception as e:  # noqa: BLE001 - any deployment failure is this attempt's failure
            if ex.state is ExecutionState.DEPLOYING and ev.execution(ex.attempt_id) is ex:
                ex.fail(None)
                error = m.ErrorInfo(
                    type_name=type(e).__name__, message=f"deployment to TaskManager {slot.tm_id} failed: {e}",
                    task=ev.task_name_with_subtask, task_manager=slot.tm_id,
                )
                if not self.speculation.discard_if_concurrent(ev, ex, error):
                    self.on_task_failed(ev, error)

    async def _check_slot_timeout(self, generation: int) -> None:
        if generation != self._waiting_since or not self._waiting or self.status.state is not JobStatus.RUNNING:
            return
        why = "Give the cluster more TaskManagers/slots, lower the parallelism, or raise slot.request.timeout.s"
        try:
            supply: m.ResourceStatus = await self.host.rm.resource_status(m.Empty(), timeout=3)
            if supply.last_start_failure:
                # the cluster is trying and failing: that, not the job's size, is the cause
                why = f"TaskManagers fail to start ({supply.start_failures} in a row); the last: {supply.last_start_failure}"
        except Exception:  # noqa: BLE001 - the hint is optional; the timeout is not
            pass
        if generation != self._waiting_since or not self._waiting or self.status.state is not JobStatus.RUNNING:
            return
        err = NoResourceAvailableError(
            f"job {self.job_id} '{self.job_graph.job_name}' could not get its slots within {self.slot_timeout_s:.0f}s: "
            f"it needs {self.slots_needed} slots and has {len(self.slot_pool)}. {why}"
        )
        self._fail_job(m.ErrorInfo.from_exception(err))

    # --- task state -------------------------------------------------------------------------------
    def update_task_execution_state(self, msg: m.TaskExecutionStateUpdate) -> m.Ack:
        ev = self.by_attempt.get(msg.execution_attempt_id)
        ex = ev.execution(msg.execution_attempt_id) if ev is not None else None
        if ev is None or ex is None:
            return m.Ack(ok=False, message="unknown or stale attempt")
        self.metrics[msg.execution_attempt_id] = msg.metrics
        if ex.state.is_terminal or not ex.can_transition(msg.state):
            return m.Ack(ok=False, message=f"ignored {ex.state.name} -> {msg.state.name}")
        was_canceling = ex.state is ExecutionState.CANCELING
        ex.transition_state(msg.state)
        if ev.speculative_executions and msg.state.is_terminal and self.speculation.on_attempt_ended(ev, ex, msg):
            self._check_terminal()
            return m.Ack()
        running = self.status.state is JobStatus.RUNNING
        if msg.state is ExecutionState.FAILED:
            ex.failure_info = msg.error
            if was_canceling and ev.id in self._pending_restart:
                # a failure the restart overtook: when the restart's recorded cause only echoes
                # it (a consumer saw the failed producer first), it is the root cause
                if msg.error is not None:
                    self._note_root_cause(msg.error, replace_only=True)
            else:
                self.on_task_failed(ev, msg.error or m.ErrorInfo(type_name="UnknownError", message="task failed", task=ev.task_name_with_subtask))
        elif msg.state is ExecutionState.CANCELED and running and not was_canceling:
            canceled = m.ErrorInfo(type_name="TaskCanceled", message="task was canceled unexpectedly", task=ev.task_name_with_subtask, consequence=True)
            self.on_task_failed(ev, msg.error or canceled)
        elif msg.state is ExecutionState.FINISHED and running:
            if msg.blocking_partitions and self.partitions is not None:
                self.host.spawn(self._commit_blocking_partitions(ev, ex.attempt_id, msg.blocking_partitions))
            if self.partitions is not None:
                self.try_deploy()  # its slot may serve a waiting region
            if all(v.execution_state is ExecutionState.FINISHED for v in self.eg.all_vertices()):
                self.host.spawn(self._finish_job())
        elif msg.state is ExecutionState.RUNNING:
            self._on_task_running()
        self._check_terminal()
        return m.Ack()

    async def _commit_blocking_partitions(self, ev: ExecutionVertex, attempt_id: str, produced: list[m.ProducedBlockingPartition]) -> None:
        """A producer FINISHED: commit its blocking partitions to Delta (one transaction per result and
        subtask), then schedule the regions that were waiting for them. A failed commit fails the
        producer: its region runs again (its files are not read by anyone)."""
        tracker = self.partitions
        assert tracker is not None
        try:
            committed = await tracker.commit(self.host.loop, ev.subtask_index, attempt_id, produced)
        except Exception as e:  # noqa: BLE001 - the producer's output is not usable: it runs again
            self._log(logging.WARNING, "committing the blocking results of %s failed: %s", ev.task_name_with_subtask, e)
            if ev.current_execution.attempt_id == attempt_id and self.status.state is JobStatus.RUNNING:
                self._handle_failure([ev], m.ErrorInfo.from_exception(e, task=ev.task_name_with_subtask))
            return
        if committed:
            self._log(logging.INFO, "%s: blocking partitions committed: %s", ev.task_name_with_subtask, ", ".join(committed))
        if self.status.state is JobStatus.RUNNING:
            self._decide_parallelism()
            self._schedule(self.strategy.on_partitions_committed(committed))

    def _decide_parallelism(self) -> None:
        """Adaptive batch: vertices whose inputs are now all committed get their parallelism."""
        if self.adaptive is None:
            return
        for jv, parallelism, volume, bound in self.adaptive.decide_ready():
            # coordinators read the new parallelism through their context (the Delta sink waits for
            # every subtask's files)
            self.allocator.refresh()
            self._log(logging.INFO, "adaptive batch: '%s' reads %.1f MB: parallelism %d (bound %d)", jv.name, volume / 1e6, parallelism, bound)

    def task_manager_lost(self, tm_id: str, cause: str) -> None:
        lost = self.slot_pool.release_task_manager(tm_id)
        if not lost or self.status.state.is_terminal or self.finishing:
            return  # nothing of ours there, or every task already finished
        self._log(logging.WARNING, "%s", cause)
        failed: list[ExecutionVertex] = []
        for ev in self.eg.all_vertices():
            for ex in ev.current_executions():
                slot = ex.assigned_resource
                if isinstance(slot, PhysicalSlot) and slot.tm_id == tm_id and not ex.state.is_terminal:
                    ex.fail(cause)
                    error = m.ErrorInfo(
                        type_name="TaskManagerLostError", message=cause, task=ev.task_name_with_subtask, task_manager=tm_id, consequence=True
                    )
                    if not self.speculation.discard_if_concurrent(ev, ex, error) and ev not in failed:
                        failed.append(ev)
        if failed and self.status.state is JobStatus.RUNNING:
            err = m.ErrorInfo(
                type_name="TaskManagerLostError", message=cause, task=failed[0].task_name_with_subtask, task_manager=tm_id, consequence=True
            )
            self._handle_failure([ev for ev in failed if ev.id not in self._pending_restart], err)
        if self.status.state in (JobStatus.RUNNING, JobStatus.RESTARTING):
            # the job goes on, and the ResourceManager suspended our requirement with the loss:
            # declare again for a replacement (a job that fails now must not get one)
            self.host.spawn(self._redeclare())
        self._check_terminal()

    async def _redeclare(self) -> None:
        try:
            await self.declare_slots(self.slots_needed)
        except Exception as e:  # noqa: BLE001 - the next slot report declares again
            self._log(logging.WARNING, "could not declare slots again: %s", e)

    # --- failure handling (Flink: ExecutionFailureHandler) -------------------------------------------
    def on_task_failed(self, ev: ExecutionVertex, error: m.ErrorInfo) -> None:
        if self.status.state is JobStatus.RUNNING and not self.finishing:
            if ev.id in self._pending_restart and not error.is_non_recoverable and error.partition_id is None:
                self._note_root_cause(error)
                return
            self._handle_failure([ev], error)
        else:
            self._fail_job(error)

    def _handle_failure(self, failed: list[ExecutionVertex], error: m.ErrorInfo) -> None:
        if not failed:
            return
        self._invalidate_missing_partition(error)
        self._act_on(self.failure_handler.get_failure_handling_result([ev.id for ev in failed], error))

    def _handle_global_failure(self, error: m.ErrorInfo) -> None:
        self._act_on(self.failure_handler.get_global_failure_handling_result(error))

    def _invalidate_missing_partition(self, error: m.ErrorInfo) -> None:
        """A consumer could not read a committed blocking partition: it is committed no more, so its
        consumers wait for the producer the failover strategy restarts (it reads the same cause)."""
        if error.throwable_type is ThrowableType.PARTITION_DATA_MISSING_ERROR and error.partition_id and self.partitions is not None:
            if self.partitions.invalidate(error.partition_id):
                self._log(logging.WARNING, "blocking partition %s is lost: its producer runs again", error.partition_id)

    def _act_on(self, result: FailureHandlingResult) -> None:
        self._record_exception(result.cause, result.restarted_tasks, result.global_failure)
        if not result.can_restart:
            self._fail_job(result.cause)
            return
        self._restart(set(result.tasks_to_restart), result.restart_delay_s)

    def _record_exception(self, error: m.ErrorInfo, restarted: int, global_failure: bool) -> None:
        self.exception_history.append(ExceptionHistoryEntry(int(self.clock() * 1000), error, restarted, global_failure))
        del self.exception_history[:-100]

    def _note_root_cause(self, error: m.ErrorInfo, replace_only: bool = False) -> None:
        """A failure inside a restart in progress: if the recorded one only echoed it, this is the root
        cause; else it is a concurrent failure (`replace_only`: then it is left out, e.g. the errors of
        tasks being cancelled)."""
        if not self.exception_history:
            return
        entry = self.exception_history[-1]
        if is_consequence(entry.error) and not is_consequence(error):
            entry.concurrent.append(entry.error)
            entry.error = error
        elif not replace_only:
            entry.concurrent.append(error)

    def _restart(self, vertices: set[ExecutionVertexID], delay_s: float) -> None:
        if self.partitions is not None:
            # lazily scheduled: a region that was never scheduled (waiting for its inputs) has nothing
            # to restart; the strategy schedules it when its inputs are committed
            vertices = {v for v in vertices if self.eg.vertex(v).execution_state is not ExecutionState.CREATED}
            if not vertices:
                return
        self._pending_restart |= vertices
        is_global = len(self._pending_restart) == len(self.eg.all_vertices())
        self._log(
            logging.WARNING, "restarting %s (%d tasks) in %.2fs",
            "the whole job" if is_global else "a region", len(self._pending_restart), delay_s,
        )
        if is_global and self.status.state is JobStatus.RUNNING:
            self._set_status(JobStatus.RESTARTING)
        if self.checkpoints is not None:
            self.host.spawn(self.checkpoints.abort_pending("a failover is in progress"))
        self._waiting = [v for v in self._waiting if v not in self._pending_restart]
        for vid in vertices:
            self._cancel_execution(self.eg.vertex(vid))
        self._restart_generation += 1
        self.host.spawn(self._restart_after(self._restart_generation, self.clock() + delay_s))

    async def _restart_after(self, generation: int, not_before: float) -> None:
        # wait until every attempt to restart has ended (cancelled, failed or its TaskManager gone)
        while any(not self.eg.vertex(v).all_attempts_ended() for v in self._pending_restart):
            if generation != self._restart_generation or self.status.state not in (JobStatus.RUNNING, JobStatus.RESTARTING):
                return
            await asyncio.sleep(0.02)
        await asyncio.sleep(max(0.0, not_before - self.clock()))
        if generation != self._restart_generation or self.status.state not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return
        vertices, self._pending_restart = set(self._pending_restart), set()
        if self.checkpoints is not None:
            try:
                self._restored_checkpoint = await self.checkpoints.latest_for_restore()
            except Exception as e:  # noqa: BLE001 - without the checkpoint there is nothing safe to restore
                self._fail_job(m.ErrorInfo.from_exception(e))
                return
        try:
            await self._reset_coordinators(vertices)
        except Exception as e:  # noqa: BLE001 - e.g. the sink's commit on restore failed: try again later
            self._log(logging.ERROR, "resetting operator coordinators failed: %s", e)
            self._handle_global_failure(m.ErrorInfo.from_exception(e))
            return
        if self.status.state not in (JobStatus.RUNNING, JobStatus.RESTARTING):
            return
        for vid in vertices:
            ev = self.eg.vertex(vid)
            ev.reset_for_new_execution()
            self.placement.pop(vid, None)
        self.num_restarts += 1
        cp = self._restored_checkpoint
        self._log(logging.INFO, "restart #%d of %d tasks from %s", self.num_restarts, len(vertices), f"checkpoint {cp.checkpoint_id}" if cp else "scratch")
        if self.status.state is JobStatus.RESTARTING:
            self._set_status(JobStatus.RUNNING)
        self._schedule(self.strategy.restart_tasks(vertices))

    async def _reset_coordinators(self, vertices: set[ExecutionVertexID]) -> None:
        """Operator coordinators of restarted operators go back to the restored checkpoint (Flink: resetToCheckpoint)."""
        restarted: dict[str, set[int]] = {}
        for v in vertices:
            restarted.setdefault(v.job_vertex_id, set()).add(v.subtask_index)
        await self.coordinators.reset_to_checkpoint(restarted, self._restored_checkpoint, self._run_io, self._current_parallelism)

    def _fenced(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` (a commit) if this JobManager still leads; asked on the I/O thread, right before it."""
        if not self.host.confirm_leadership():
            raise LeadershipLostError(f"job {self.job_id}: this JobManager no longer leads the cluster; nothing is committed")
        return fn(*args)

    async def _run_io(self, fn: Callable[..., Any], *args: Any) -> Any:
        if self.checkpoints is not None:
            return await self.checkpoints.run_io(fn, *args)
        return await self.host.loop.run_in_executor(None, fn, *args)

    def _cancel_execution(self, ev: ExecutionVertex) -> None:
        for ex in ev.current_executions():
            self._cancel_attempt(ev, ex)

    def _cancel_attempt(self, ev: ExecutionVertex, ex: Execution) -> None:
        if ex.state in (ExecutionState.CREATED, ExecutionState.SCHEDULED):
            ex.transition_state(ExecutionState.CANCELED)
        elif not ex.state.is_terminal and ex.state is not ExecutionState.CANCELING:
            ex.transition_state(ExecutionState.CANCELING)
            slot = ex.assigned_resource if isinstance(ex.assigned_resource, PhysicalSlot) else self.placement.get(ev.id)
            if slot is not None:
                self.host.spawn(self._cancel_task(self.host.task_executor(slot.tm_id), ev, ex.attempt_id))

    async def _cancel_task(self, te: gw.TaskExecutorGateway, ev: ExecutionVertex, attempt_id: str) -> None:
        try:
            ack: m.Ack = await te.cancel_task(m.CancelTask(execution_attempt_id=attempt_id), timeout=10)
            gone = not ack.ok  # the TaskExecutor does not know the attempt (never arrived or already ended)
        except Exception:  # noqa: BLE001 - an unreachable TaskManager's tasks are gone anyway
            gone = True
        ex = ev.execution(attempt_id)
        if gone and ex is not None and not ex.state.is_terminal:
            ex.transition_state(ExecutionState.CANCELED)
            self._check_terminal()

    def _fail_job(self, error: m.ErrorInfo) -> None:
        if self.status.state not in (JobStatus.RUNNING, JobStatus.CREATED, JobStatus.RESTARTING):
            if self.status.state is JobStatus.FAILING and is_consequence(self.failure) and not is_consequence(error):
                # a consumer saw its producer's failure before the producer's own report arrived:
                # the job's cause is the producer's error, not the consumer's echo of it
                self.failure = error
                self._log(logging.ERROR, "job fails, root cause: %s", error.describe())
            return
        self.failure = error
        self._log(logging.ERROR, "job fails: %s", error.describe())
        self._set_status(JobStatus.FAILING)
        self._pending_restart.clear()
        self._waiting = []
        self._stop_checkpointing()
        self.host.spawn(self.declare_slots(0))
        self._cancel_all()
        self._check_terminal()

    def _cancel_all(self) -> None:
        for ev in self.eg.all_vertices():
            self._cancel_execution(ev)

    def cancel(self) -> m.Ack:
        if self.finishing:
            # every task finished and the final commit runs: its outcome decides FINISHED or FAILED
            return m.Ack(ok=False, message=f"job {self.job_id} is committing its results and can no longer be cancelled")
        if self.status.state in (JobStatus.RUNNING, JobStatus.CREATED, JobStatus.FAILING, JobStatus.RESTARTING):
            if self.status.state is not JobStatus.FAILING:
                self._set_status(JobStatus.CANCELLING)
                self.host.spawn(self.declare_slots(0))
            self._pending_restart.clear()
            self._waiting = []
            self._stop_checkpointing()
            self._cancel_all()
            self._check_terminal()
        return m.Ack()

    def suspend(self, cause: str) -> None:
        """Leadership lost (Flink: SchedulerBase suspend): the tasks are cancelled and the job is
        SUSPENDED at once, without waiting for them; nothing more is committed (the fence refuses
        it) and nothing is deleted, so the new leader finds every file its restore needs."""
        if self.status.state.is_terminal:
            return
        self._log(logging.WARNING, "suspending the job: %s", cause)
        self._pending_restart.clear()
        self._waiting = []
        if self.checkpoints is not None:
            self.checkpoints.suspend()
        self._cancel_all()
        self._finalize(JobStatus.SUSPENDED)

    def _stop_checkpointing(self) -> None:
        if self.checkpoints is not None:
            self.checkpoints.stop_periodic()
            self.host.spawn(self.checkpoints.abort_pending("the job is ending"))

    def _check_terminal(self) -> None:
        st = self.status.state
        if self.stopping and st is JobStatus.RUNNING:
            if all(ev.all_attempts_ended() for ev in self.eg.all_vertices()):
                self._finalize(JobStatus.FINISHED)
            return
        if st not in (JobStatus.FAILING, JobStatus.CANCELLING):
            return
        if all(ev.all_attempts_ended() for ev in self.eg.all_vertices()):
            self._finalize(JobStatus.FAILED if st is JobStatus.FAILING else JobStatus.CANCELED)

    # --- checkpoints --------------------------------------------------------------------------------
    def all_tasks_running(self) -> bool:
        return self.status.state is JobStatus.RUNNING and not self._pending_restart and all(
            v.execution_state is ExecutionState.RUNNING for v in self.eg.all_vertices()
        )

    def _all_tasks_started(self) -> bool:
        """Every task runs or (FLIP-147) has finished, and one runs: periodic checkpoints can start."""
        if not self.checkpoint_config.checkpoints_after_tasks_finish:
            return self.all_tasks_running()
        states = [v.execution_state for v in self.eg.all_vertices()]
        return (
            self.status.state is JobStatus.RUNNING and not self._pending_restart
            and all(st in (ExecutionState.RUNNING, ExecutionState.FINISHED) for st in states)
            and ExecutionState.RUNNING in states
        )

    def _on_task_running(self) -> None:
        if self.checkpoints is not None and self.checkpoint_config.enabled and self._all_tasks_started():
            self.checkpoints.start_periodic()

    async def on_checkpoint_completed(self, checkpoint: Any) -> None:
        """Operator coordinators commit what the checkpoint holds (the Delta sink's two-phase commit)."""
        for h in self.coordinators:
            try:
                await self._run_io(self._fenced, h.coordinator.notify_checkpoint_complete, checkpoint.checkpoint_id, h.committables(checkpoint))
            except LeadershipLostError as e:
                # the checkpoint is committed, its sink's commit is not: whoever restores it next commits
                # it (a new leader; or this one, should it still lead after all: a global failover)
                self._log(logging.WARNING, "coordinator of '%s' does not commit checkpoint %d: %s", h.name, checkpoint.checkpoint_id, e)
                if self.status.state is JobStatus.RUNNING and not self.finishing:
                    self._handle_global_failure(m.ErrorInfo.from_exception(e, operator=h.name))
                return
            except Exception as e:  # noqa: BLE001 - the commit is retried from the checkpoint on restore
                err = m.ErrorInfo.from_exception(e, operator=h.name)
                self._log(logging.ERROR, "coordinator of '%s' failed to commit checkpoint %d: %s", h.name, checkpoint.checkpoint_id, err.describe())
                self._failed_commit = (checkpoint.checkpoint_id, err)
                if self.status.state is JobStatus.RUNNING and not self.finishing:
                    self._handle_global_failure(err)
                return

    # --- savepoints (Flink: SchedulerBase.triggerSavepoint / stopWithSavepoint) -----------------------
    async def trigger_savepoint(self, target_directory: str | None, stop: bool, drain: bool) -> m.SavepointLocation:
        """Take a savepoint; with `stop`, end the job (FINISHED) once it completed and its sinks committed.

        A failed savepoint leaves no commit and the job running (a stopping job's sources resume).
        """
        if self.checkpoints is None or self.status.state is not JobStatus.RUNNING or self.finishing:
            finishing = " and finishing" if self.finishing else ""
            raise CheckpointError(f"job {self.job_id} is {self.status.state.name}{finishing}: savepoints need a running streaming job")
        from runtime.storage.savepoints import default_savepoints_base, new_savepoint_location

        base = target_directory or checkpointing_options.SAVEPOINT_DIRECTORY.get(self.job_graph.config) or default_savepoints_base(self.job_graph.job_name)
        location = new_savepoint_location(base, self.job_id)
        meta = await self.checkpoints.trigger_savepoint(m.SavepointOptions(target=location, stop=stop, drain=drain))
        if stop:
            why = self._why_not_stopping(meta.checkpoint_id)
            if why is not None:
                # Flink's StopWithSavepointStoppingException: the savepoint is there, the job goes on
                # (or fails): reporting success would let a caller start a second copy from it
                raise StopWithSavepointStoppingError(
                    f"job {self.job_id}: stop-with-savepoint did not stop the job: savepoint {meta.checkpoint_id} exists at {location}, "
                    f"but {why}. The job is {self.status.state.name}, not stopped: do not start another run from this savepoint "
                    "while it runs; stop it again (or cancel it) once it is RUNNING"
                )
            # the job's result names the savepoint it stopped with (the next run starts from it)
            self.accumulators["savepoint_path"] = location
            self.accumulators["savepoint_checkpoint_id"] = meta.checkpoint_id
            self._stop_after_savepoint(meta.checkpoint_id)
        return m.SavepointLocation(location=location, checkpoint_id=meta.checkpoint_id)

    def source_reached_end_of_input(self, attempt_id: str) -> m.Ack:
        """A source's input ended and it holds (execution.end-of-input.savepoint): once every
        source's current attempt is there, stop the job with a drained savepoint."""
        ev = self.by_attempt.get(attempt_id)
        if ev is None or ev.current_execution.attempt_id != attempt_id:
            return m.Ack(ok=False, message="unknown or stale attempt")
        self._sources_at_end.add(attempt_id)
        sources = [v for v in self.eg.all_vertices() if not v.job_vertex.inputs]
        at_end = sum(v.current_execution.attempt_id in self._sources_at_end for v in sources)
        self._log(logging.INFO, "%s reached the end of its input (%d of %d sources)", ev.task_name_with_subtask, at_end, len(sources))
        if at_end == len(sources) and self.termination.state is Termination.RUNNING:
            self.termination.transition(Termination.FINAL_SAVEPOINT)
            self.host.spawn(self._final_savepoint())
        return m.Ack()

    async def _final_savepoint(self) -> None:
        """Stop with a drained savepoint (event time ends, timers and windows fire, then the state
        is saved); retried, then the job fails: its state must not be lost silently."""
        error: Exception | None = None
        try:
            for attempt in range(1, FINAL_SAVEPOINT_ATTEMPTS + 1):
                while self.status.state is JobStatus.RUNNING and not self.stopping and not self.all_tasks_running():
                    await asyncio.sleep(0.02)  # a short input may end before every task was deployed
                if self.status.state is not JobStatus.RUNNING or self.stopping:
                    return  # a failover restarts the sources, which report their end again
                try:
                    where = await self.trigger_savepoint(None, stop=True, drain=True)
                    self._log(logging.INFO, "every source reached the end of its input: stopped with savepoint %s", where.location)
                    return
                except CheckpointError as e:
                    error = e
                    self._log(logging.WARNING, "final savepoint, attempt %d of %d, failed: %s", attempt, FINAL_SAVEPOINT_ATTEMPTS, e)
                    await asyncio.sleep(0.5 * attempt)
            if self.status.state is JobStatus.RUNNING and not self.stopping:
                self._fail_job(m.ErrorInfo(
                    type_name="CheckpointError",
                    message=f"the savepoint at the end of the input failed {FINAL_SAVEPOINT_ATTEMPTS} times (last: {error}); the job's state was not saved",
                ))
        finally:
            if self.termination.state is Termination.FINAL_SAVEPOINT:
                self.termination.transition(Termination.RUNNING)

    def _why_not_stopping(self, savepoint_id: int) -> str | None:
        """None if the job can end with this completed stop-with-savepoint; else why not."""
        failed = self._failed_commit
        if failed is not None and failed[0] == savepoint_id:
            return f"committing it failed ({failed[1].describe()}), so the job fails over from it instead of stopping"
        if self.status.state is not JobStatus.RUNNING:
            return f"the job became {self.status.state.name} while the savepoint was taken"
        return None

    def _stop_after_savepoint(self, savepoint_id: int) -> None:
        """The stop-with-savepoint completed (sinks committed it, sources hold after its barrier):
        end every task; the job FINISHES without draining anything more (Flink: stop without
        --drain ends in FINISHED, state in the savepoint)."""
        if self.status.state is not JobStatus.RUNNING or self.finishing:
            return
        self._log(logging.INFO, "stopped with savepoint %d: ending every task", savepoint_id)
        self.termination.transition(Termination.STOPPING)  # failures and TaskManager losses no longer matter
        self._pending_restart.clear()
        self._waiting = []
        if self.checkpoints is not None:
            self.checkpoints.stop_periodic()
        self.host.spawn(self.declare_slots(0))
        self._cancel_all()
        self._check_terminal()

    # --- end of the job -----------------------------------------------------------------------------
    async def _finish_job(self) -> None:
        """All tasks finished: coordinators commit (e.g. the Delta sink), then the job is FINISHED.

        While this runs the job is 'finishing': cancels are refused and TaskManager losses ignored,
        so nothing closes a coordinator (deleting its files) under a commit in flight.
        """
        if self.finishing:
            return
        self.termination.transition(Termination.FINISHING)
        if self.checkpoints is not None:
            self.checkpoints.stop_periodic()
            await self.checkpoints.abort_pending("every task finished")
            await self.checkpoints.settle()  # a checkpoint completing now commits before the final commit
        await self.speculation.await_losing_attempts()
        try:
            per_operator: dict[str, Any] = {}
            for h in self.coordinators:
                result = await self._run_io(self._fenced, h.coordinator.on_job_finished)
                if result:
                    per_operator[h.name] = result
                    # flat keys for the common one-sink job; with several, the first one's stay
                    for k, v in result.items():
                        self.accumulators.setdefault(k, v)
            if per_operator:
                self.accumulators["operators"] = per_operator
        except LeadershipLostError as e:  # the new leader recovers the job and commits its end
            self.suspend(str(e))
            return
        except Exception as e:  # noqa: BLE001 - a failed commit fails the job; nothing partial is visible
            self.failure = m.ErrorInfo.from_exception(e)
            self._log(logging.ERROR, "commit at job end failed: %s", self.failure.describe())
            self._set_status(JobStatus.FAILING)
            self._finalize(JobStatus.FAILED)
            return
        if self.partitions is not None:
            from runtime.storage.blocking_results import remove_job_results

            await self.host.loop.run_in_executor(self.partitions.io, remove_job_results, self.partitions.results_dir)
        self._finalize(JobStatus.FINISHED)

    def _finalize(self, status: JobStatus) -> None:
        if self.status.state.is_terminal:
            return
        self.end_time = self.clock()
        if status is JobStatus.SUSPENDED:
            # no coordinator closes (that would delete uncommitted files a restore commits), no
            # checkpoint or blocking-result clean-up: all of it belongs to the new leader now
            if self.partitions is not None:
                self.partitions.shutdown()
            self._set_status(status)
            self.archived = self.job_details()
            self.host.spawn(self.host.release_resources())
            self.host.job_reached_terminal(self.result())
            return
        if status is not JobStatus.FINISHED:
            self._retain_restorable_outputs()
        self.coordinators.close_all(lambda h, e: self._log(logging.WARNING, "closing the coordinator of '%s' failed: %s", h.name, e))
        cleanup = None if self.checkpoints is None else self.checkpoints.shutdown()
        if self.partitions is not None:
            from runtime.storage.blocking_results import remove_job_results

            if status is not JobStatus.FINISHED:  # a job's blocking results go with it (a FINISHED job removed them before this)
                self.partitions.io.submit(remove_job_results, self.partitions.results_dir)
            self.partitions.shutdown()
        self._set_status(status)
        self.archived = self.job_details()
        self.host.spawn(self.host.release_resources())
        if cleanup is None or cleanup.done():
            self.host.job_reached_terminal(self.result())
        else:
            self.host.spawn(self._report_end_after(cleanup))

    async def _report_end_after(self, cleanup: concurrent.futures.Future[None]) -> None:
        """The end is reported once the checkpoint clean-up ran (it never raises: it logs)."""
        await asyncio.wrap_future(cleanup)
        self.host.job_reached_terminal(self.result())

    def _retain_restorable_outputs(self) -> None:
        """The job ends without finishing, but a later run may restore its newest checkpoint (retained
        checkpoints, the restore sensor, `run -s`): coordinators must not delete what that holds, e.g.
        the files of a checkpoint that completed while the job was failing, before its commit."""
        checkpoints = ([] if self.checkpoints is None else self.checkpoints.restorable()) + (
            [self._restored_checkpoint] if self._restored_checkpoint is not None else []
        )
        for h in self.coordinators:
            for cp in checkpoints:
                try:
                    h.coordinator.retain_for_restore(cp.checkpoint_id, h.committables(cp))
                except Exception:  # noqa: BLE001 - keeping files is best effort; close then keeps all
                    self._log(logging.WARNING, "coordinator of '%s' could not note checkpoint %d as restorable", h.name, cp.checkpoint_id)

    # --- the JobMaster's calls (SchedulerNG) ---------------------------------------------------------
    def on_slots_offered(self) -> None:
        self.try_deploy()

    async def trigger_checkpoint(self) -> int | None:
        if self.checkpoints is None:
            raise CheckpointError(f"job {self.job_id} does not checkpoint")
        return await self.checkpoints.trigger_checkpoint()

    async def acknowledge_checkpoint(self, msg: m.AcknowledgeCheckpoint) -> m.Ack:
        if self.checkpoints is None:
            return m.Ack(ok=False, message=f"job {self.job_id} does not checkpoint")
        await self.checkpoints.receive_acknowledge(msg)
        return m.Ack()

    async def decline_checkpoint(self, msg: m.DeclineCheckpoint) -> m.Ack:
        if self.checkpoints is not None:
            await self.checkpoints.receive_decline(msg)
        return m.Ack()

    def deliver_operator_event(self, node_id: int, subtask: int, attempt: int, event: Any) -> m.Ack:
        holder = self.coordinators.holders.get(node_id)
        if holder is None:
            return m.Ack(ok=False, message=f"no coordinator for operator {node_id}")
        ev = self.eg.vertex(ExecutionVertexID(holder.vertex.id, subtask))
        if attempt not in {ex.attempt_number for ex in ev.current_executions()}:
            # a late event of an attempt that was replaced (a restart): the coordinator must not take
            # it for the new attempt's (a reader registration would route its splits to the dead one)
            return m.Ack(ok=False, message=f"attempt {attempt} of subtask {subtask} is no longer current")
        holder.coordinator.handle_event_from_operator(subtask, attempt, event)
        return m.Ack()

    def deliver_coordination_request(self, node_id: int, request: Any) -> Any:
        coord = self.coordinators.get(node_id)
        if coord is None:
            from runtime.core.errors import UnknownJobError

            raise UnknownJobError(f"job {self.job_id} has no coordinator for operator {node_id}")
        return coord.handle_coordination_request(request)

    # --- what the speculative execution handler asks (SpeculativeSchedulerOperations) ----------------
    def log(self, level: int, msg: str, *args: Any) -> None:
        self._log(level, msg, *args)

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Any:
        return self.host.loop.call_later(delay_s, callback)

    def is_restart_pending(self, vertex_id: ExecutionVertexID) -> bool:
        return vertex_id in self._pending_restart

    def register_attempt(self, ev: ExecutionVertex, ex: Execution) -> None:
        self.by_attempt[ex.attempt_id] = ev

    def deploy_attempt(self, ev: ExecutionVertex, ex: Execution) -> None:
        self.host.spawn(self._deploy(ev, ex))

    def cancel_attempt(self, ev: ExecutionVertex, ex: Execution) -> None:
        self._cancel_attempt(ev, ex)

    def redeclare_slots(self) -> None:
        self.host.spawn(self._redeclare())

    def commit_blocking_partitions(self, ev: ExecutionVertex, attempt_id: str, produced: list[m.ProducedBlockingPartition]) -> None:
        self.host.spawn(self._commit_blocking_partitions(ev, attempt_id, produced))

    def set_current_slot(self, vertex_id: ExecutionVertexID, slot: PhysicalSlot) -> None:
        self.placement[vertex_id] = slot

    def job_resource_requirements(self) -> dict[str, m.VertexParallelismBounds]:
        return {jv.id: m.VertexParallelismBounds(lower_bound=jv.parallelism, upper_bound=jv.parallelism) for jv in self.job_graph.vertices}

    # --- views (pure functions of a snapshot: views.py) -------------------------------------------
    async def refresh_task_metrics(self, timeout_s: float = 2.0) -> None:
        """Ask every TaskExecutor running our tasks for their metrics, in parallel; a silent one keeps the last known."""
        s = self
        by_tm: dict[str, list[str]] = {}
        for ev in s.eg.all_vertices():
            ex = ev.current_execution
            slot = s.placement.get(ev.id)
            if slot is not None and ex.state in (ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.CANCELING):
                by_tm.setdefault(slot.tm_id, []).append(ex.attempt_id)
        if not by_tm:
            return

        async def ask(tm_id: str, attempts: list[str]) -> m.TaskMetricsReport | None:
            te = self.host.task_executor(tm_id)
            try:
                return await te.request_task_metrics(m.TaskMetricsRequest(attempt_ids=attempts), timeout=timeout_s)
            except Exception as e:  # noqa: BLE001 - lost or busy TaskManager: keep the last known metrics
                self._log(logging.DEBUG, "no metrics from TaskManager %s: %s", tm_id, e)
                return None

        reports = await asyncio.gather(*(ask(tm, attempts) for tm, attempts in by_tm.items()))
        for report in reports:
            for entry in report.tasks if report is not None else []:
                reported = s.by_attempt.get(entry.attempt_id)
                # a terminal attempt's final metrics came with its state update; do not overwrite them
                if reported is None or reported.current_execution.attempt_id != entry.attempt_id or reported.execution_state.is_terminal:
                    continue
                s.metrics[entry.attempt_id] = entry.metrics
                s.backpressure[entry.attempt_id] = (entry.backpressured_ms, entry.backpressure_ratio)
                s.busy[entry.attempt_id] = entry.busy_ratio

    def snapshot(self) -> views.JobSnapshot:
        return views.take_snapshot(
            self.eg, job_name=self.job_graph.job_name, status=self.status.state, start_time=self.start_time,
            end_time=self.end_time, now=self.clock(), failure=self.failure, metrics=self.metrics, backpressure=self.backpressure, busy=self.busy,
            is_committed=self.partitions.is_committed if self.partitions is not None else None,
            exceptions=tuple(views.ExceptionView(e.timestamp_ms, e.error, e.restarted_tasks, e.global_failure, tuple(e.concurrent))
                             for e in self.exception_history),
            num_restarts=self.num_restarts, restart_strategy=self.restart_strategy.describe(), scheduler=self.name,
            accumulators=dict(self.accumulators),
        )

    def vertex_metrics(self) -> list[m.VertexMetrics]:
        return views.vertex_metrics(self.snapshot())

    def result(self) -> m.JobResultMessage:
        return views.job_result(self.snapshot())

    def exceptions(self) -> m.JobExceptionsMessage:
        return views.exceptions(self.snapshot())

    def job_details(self) -> m.JobDetailsMessage:
        """The job as the REST API shows it."""
        return views.job_details(self.snapshot())

    def checkpoint_statistics(self) -> m.CheckpointStatisticsMessage:
        if self.checkpoints is None:
            return m.CheckpointStatisticsMessage(job_id=self.job_id, enabled=False)
        return m.CheckpointStatisticsMessage(
            job_id=self.job_id,
            enabled=True,
            interval_ms=self.checkpoint_config.interval_ms,
            mode=self.checkpoint_config.mode.value,
            path=self.checkpoint_config.table_uri,
            statistics_json=self.checkpoints.stats.snapshot().model_dump_json(),
        )


_EVENT_STATES = (ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING)


class _CheckpointHost:
    """The CheckpointCoordinator's view of the scheduler and the JobMaster."""

    def __init__(self, scheduler: DefaultScheduler) -> None:
        self.s = scheduler

    def checkpoint_tasks(self) -> list[CheckpointTask] | str:
        s = self.s
        if s.status.state is not JobStatus.RUNNING:
            return f"the job is {s.status.state.name}"
        if s._pending_restart:
            return "a restart is pending"
        out = []
        for ev in s.eg.all_vertices():
            jv = ev.job_vertex
            slot = s.placement.get(ev.id)
            out.append(
                CheckpointTask(
                    attempt_id=ev.current_execution.attempt_id,
                    tm_id=slot.tm_id if slot is not None else "",
                    vertex_id=jv.id,
                    subtask_index=ev.subtask_index,
                    parallelism=jv.parallelism,
                    operator_ids=tuple(op.operator_id for op in jv.operators),
                    is_source=not jv.inputs,
                    max_parallelism=jv.max_parallelism,
                    state=ev.execution_state,
                    upstream=tuple(sorted({(p.producer.job_vertex_id, p.producer.subtask_index) for p in ev.consumed_partitions()})),
                )
            )
        return out

    def final_committables(self, finished: list[CheckpointTask]) -> dict[str, dict[int, bytes]]:
        subtasks_of: dict[str, set[int]] = {}
        for t in finished:
            subtasks_of.setdefault(t.vertex_id, set()).add(t.subtask_index)
        return self.s.coordinators.final_committables(subtasks_of)

    async def snapshot_coordinators(self, checkpoint_id: int) -> dict[str, bytes]:
        return await self.s.coordinators.checkpoint_all(checkpoint_id)

    def tasks_triggered(self, checkpoint_id: int) -> None:
        self.s.coordinators.triggered()

    async def send_trigger(self, task: CheckpointTask, msg: m.TriggerCheckpoint) -> None:
        ack: m.Ack = await self.s.host.task_executor(task.tm_id).trigger_checkpoint(msg, timeout=10)
        if not ack.ok:
            raise RuntimeError(ack.message)

    async def send_notify(self, task: CheckpointTask, msg: m.NotifyCheckpoint) -> None:
        await self.s.host.task_executor(task.tm_id).notify_checkpoint(msg, timeout=10)

    def call_later(self, delay_s: float, callback: Callable[[], None]) -> Any:
        return self.s.host.loop.call_later(delay_s, callback)

    def spawn(self, coro: Any) -> Any:
        return self.s.host.spawn(coro)

    async def on_checkpoint_completed(self, checkpoint: Any) -> None:
        await self.s.on_checkpoint_completed(checkpoint)

    def on_checkpoint_failures_exceeded(self, error: m.ErrorInfo) -> None:
        s = self.s
        if s.status.state is JobStatus.RUNNING and not s.finishing:
            s._handle_global_failure(error)
