"""Task: one thread running one subtask attempt (Flink: Task + StreamTask's mailbox loop)."""
from __future__ import annotations

import collections
import contextlib
import gc
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any, cast

import cloudpickle

from runtime.core.checkpoint import (
    CheckpointBarrier,
    CheckpointingMode,
    OperatorSnapshot,
    StateInitializationContext,
    canonical_snapshot,
    copy_on_write_snapshot,
    mark_forked_snapshot_writer,
)
from runtime.core.errors import MillraceError
from runtime.core.keygroups import compute_key_group_range_for_operator_index
from runtime.core.operators import InputStatus, SourceOperator, TaskMetrics
from runtime.core.options import execution as execution_options
from runtime.core.options import state as state_options
from runtime.core.options.task import TaskSettings
from runtime.core.records import MAX_TIMESTAMP, EndOfPartition, RecordBatch, Watermark, WatermarkStatus
from runtime.core.state_machine import StateMachine
from runtime.core.states import ExecutionState, execution_state_machine
from runtime.graph.job_graph import ChainedOperator
from runtime.rpc.deployment import InputGateDeploymentDescriptor, TaskDeploymentDescriptor, TaskRestore
from runtime.rpc.messages import (
    AcknowledgeCheckpoint,
    DeclineCheckpoint,
    ErrorInfo,
    OperatorEventMessage,
    SavepointOptions,
    SourceReachedEndOfInput,
    StateFileHandle,
    TaskExecutionStateUpdate,
    TaskMetricsSnapshot,
    TaskStateSnapshot,
)
from runtime.taskmanager.interrupt import TaskInterrupter
from runtime.taskmanager.mailbox import TaskMailbox
from runtime.taskmanager.network.errors import PartitionReleasedError
from runtime.taskmanager.network.partition import estimate_nbytes
from runtime.taskmanager.operator_chain import OperatorChain, annotate
from runtime.taskmanager.user_code import load_user_code

log = logging.getLogger(__name__)

_POLL_CAP_S = 0.05
SNAPSHOT_ASYNC_MODE_KEY = state_options.SNAPSHOT_ASYNC_MODE.key  # the option's key under its old name
# how long a cancelled task waits for its snapshot writer thread before it reports CANCELED: well
# under task.cancellation.timeout.s (30 s by default), after which the TaskManager gives up the process
SNAPSHOT_CANCEL_WAIT_S = 10.0


class SharedStateUnknownError(MillraceError):
    """An incremental checkpoint names an earlier checkpoint whose state file this task never wrote or forgot."""


class TaskCanceledError(MillraceError):
    pass


class _EventGateway:
    """Operator -> coordinator events; blocks until the JobMaster has them (ordering before FINISHED)."""

    def __init__(self, task: Task, spec: ChainedOperator) -> None:
        self.task, self.spec = task, spec

    def send_event_to_coordinator(self, event: Any) -> None:
        tdd = self.task.tdd
        self.task.send_operator_event(
            OperatorEventMessage(
                job_id=tdd.job_id,
                execution_attempt_id=tdd.execution_attempt_id,
                node_id=self.spec.node_id,
                subtask_index=tdd.subtask_index,
                attempt_number=tdd.attempt_number,
                payload=cloudpickle.dumps(event),
            )
        )


BUFFER_TIMEOUT_KEY = execution_options.BUFFER_TIMEOUT.key  # the option's key under its old name


PROFILE_DIR_ENV = "MILLRACE_PROFILE_DIR"  # set: each task runs under cProfile and leaves a .prof file there


def buffer_timeout_ms(config: Mapping[str, str]) -> int | None:
    """The job's execution.buffer-timeout in ms ("100 ms", "0", "-1"); None: the TaskManager's default."""
    return execution_options.BUFFER_TIMEOUT.get(config)


class _LogAdapter(logging.LoggerAdapter[logging.Logger]):
    """Every message prefixed with its job and task."""

    def __init__(self, logger: logging.Logger, job_id: str, task: str) -> None:
        super().__init__(logger, {"job_id": job_id, "task": task})
        self._prefix = f"[job {job_id} | {task}]"

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"{self._prefix} {msg}", kwargs


class _LogicalInput:
    """All channels that feed one (operator, input index): one watermark valve over them."""

    def __init__(self, node_id: int, type_number: int, num_channels: int, valve_cls: Any) -> None:
        self.node_id, self.type_number = node_id, type_number
        self.valve = valve_cls(num_channels)
        self.open_channels = num_channels


class Task:
    start_delay_s = 0.0  # testing: set by a TaskExecutor configured as slow
    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        network: Any,
        tm_id: str,
        report_state: Callable[[TaskExecutionStateUpdate], None],
        send_operator_event: Callable[[OperatorEventMessage | SourceReachedEndOfInput], None],
        on_terminal: Callable[[Task], None],
        checkpoint_response: Callable[[AcknowledgeCheckpoint | DeclineCheckpoint], None] | None = None,
    ) -> None:
        self.tdd = tdd
        self.checkpoint_response = checkpoint_response
        self.network = network
        self.tm_id = tm_id
        self.report_state = report_state
        self.send_operator_event = send_operator_event
        # set by the TaskExecutor when events are sent without waiting (runtime.rpc.ordered_sender)
        self.flush_operator_events: Callable[[], None] = lambda: None
        self.on_terminal = on_terminal
        self.metrics = TaskMetrics()
        self.machine: StateMachine[ExecutionState] = execution_state_machine(f"task {tdd.task_name_with_subtask}")
        self.machine.transition(ExecutionState.SCHEDULED)
        self.machine.transition(ExecutionState.DEPLOYING)
        self._canceled = threading.Event()
        self._lock = threading.Lock()
        self._partitions: list[Any] = []
        self._writers: list[Any] = []
        self._gate: Any = None
        self._interrupter = TaskInterrupter()
        # work for the task thread from other threads (checkpoint triggers, notifications): run between inputs
        self._control: collections.deque[Callable[[], None]] = collections.deque()
        # the stop-with-savepoint whose snapshot this task took: no processing-time timer runs and
        # nothing is emitted until the task is ended, or the savepoint fails (then they resume)
        self._held_for_savepoint: int | None = None
        self._aborted_checkpoints: collections.deque[int] = collections.deque(maxlen=16)  # notified as aborted (task thread)
        self._at_end_of_input = False  # a source whose input ended, holding for the final savepoint
        self._chain: OperatorChain | None = None
        self._snapshot_thread: ThreadPoolExecutor | None = None  # the asynchronous part of snapshots
        self._barrier_handler: Any = None
        self._snapshot_writers: set[int] = set()  # pids of forked snapshot writers still running
        self._last_state_bytes: int | None = None  # the last checkpoint's state file(s); async-mode auto decides by it
        # checkpoint id -> the state file this task wrote for it (snapshot thread only): incremental
        # checkpoints name earlier ones they build on, and the JobMaster needs their paths
        self._state_file_paths: dict[int, str] = {}
        # backpressure ratio sampling (touched only by the TaskExecutor's thread): (time ns, backpressured ns)
        self._bp_sample: tuple[int, int] = (time.monotonic_ns(), 0)
        self._bp_ratio = 0.0
        # idle: the task thread waited for input (a source for its schedule, an input gate for data)
        self.idle_ns = 0
        self._busy_sample: tuple[int, int, int] = (time.monotonic_ns(), 0, 0)  # (when, idle ns, backpressured ns)
        self._busy_ratio = 0.0
        self.log = _LogAdapter(log, tdd.job_id, f"{tdd.task_name_with_subtask} @ {tm_id}")
        target = self._run_profiled if os.environ.get(PROFILE_DIR_ENV) else self._run
        self.thread = threading.Thread(target=target, name=f"task-{tdd.task_name_with_subtask}", daemon=True)

    @property
    def attempt_id(self) -> str:
        return self.tdd.execution_attempt_id

    @property
    def state(self) -> ExecutionState:
        return self.machine.state

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        """Stop the task: wakes it if blocked on input or on backpressure."""
        with self._lock:
            if self.machine.state.is_terminal or self._canceled.is_set():
                return
            self._canceled.set()
            if self.machine.can_transition(ExecutionState.CANCELING):
                self.machine.transition(ExecutionState.CANCELING)
        for p in self._partitions:
            self._quietly(p.release)
        if self._gate is not None:
            self._quietly(self._gate.close)

    def interrupt(self) -> bool:
        """Raise TaskInterruptedError in a cancelled task's thread still running user code (once)."""
        return self._canceled.is_set() and self._interrupter.interrupt()

    def fail_with(self, exc_type: type[BaseException]) -> bool:
        """Raise `exc_type` in the task's thread while it runs its processing loop (once): the task FAILS with it.

        The memory watchdog's way to fail a task whose TaskManager is over its memory budget.
        """
        return self._interrupter.interrupt(exc_type)

    def _quietly(self, action: Callable[..., Any], *args: Any) -> None:
        """Clean-up on failure/cancel paths must go on: errors are logged, not raised."""
        try:
            action(*args)
        except Exception:
            self.log.debug("clean-up step %s failed", getattr(action, "__qualname__", action), exc_info=True)

    # ---------------------------------------------------------------------------------------
    def _transition(self, to: ExecutionState, error: ErrorInfo | None = None, blocking_partitions: list[Any] | None = None) -> None:
        with self._lock:
            if self.machine.state.is_terminal:
                return
            if not self.machine.can_transition(to):
                return
            self.machine.transition(to)
        update = TaskExecutionStateUpdate(
            job_id=self.tdd.job_id,
            execution_attempt_id=self.attempt_id,
            state=to,
            error=error,
            metrics=self.metrics_snapshot(),
            blocking_partitions=blocking_partitions or [],
        )
        try:
            self.report_state(update)
        except Exception as e:  # noqa: BLE001 - the JobMaster may be gone; heartbeats will tell
            self.log.warning("could not report %s to the JobMaster: %s", to.name, e)

    # --- metrics (read from other threads: counters are plain ints) ---------------------------
    def metrics_snapshot(self) -> TaskMetricsSnapshot:
        m = self.metrics
        bytes_out = sum(p.bytes_out for p in list(self._partitions))
        return TaskMetricsSnapshot(records_in=m.records_in, records_out=m.records_out, bytes_in=m.bytes_in, bytes_out=bytes_out)

    def backpressured_ns(self) -> int:
        """Time this task's thread spent blocked on full output subpartitions (a thread waits in one at a time)."""
        return sum(p.backpressured_ns() for p in list(self._partitions))

    def backpressure_sample(self, min_interval_s: float = 0.2) -> tuple[int, float]:
        """(backpressured ms in total, share of the time since the previous sample spent blocked).

        Flink's backPressuredTimeMsPerSecond over the interval between two metric requests; a
        request sooner than `min_interval_s` after the previous one repeats its ratio (too short
        an interval says nothing). Call from one thread only (the TaskExecutor's).
        """
        now, total = time.monotonic_ns(), self.backpressured_ns()
        last_t, last_total = self._bp_sample
        if now - last_t >= min_interval_s * 1e9:
            self._bp_ratio = min(1.0, max(0.0, (total - last_total) / (now - last_t)))
            self._bp_sample = (now, total)
        return total // 1_000_000, self._bp_ratio

    def idle_total_ns(self) -> int:
        gate = self._gate
        return self.idle_ns + (gate.wait_ns if gate is not None else 0)

    def busy_sample(self, min_interval_s: float = 0.2) -> float:
        """Share of the time since the previous sample this task's thread was busy: neither waiting
        for input nor blocked on full outputs (Flink's busyTimeMsPerSecond / 1000). Like
        backpressure_sample: one calling thread, a too-short interval repeats the last ratio."""
        now, idle, bp = time.monotonic_ns(), self.idle_total_ns(), self.backpressured_ns()
        last_t, last_idle, last_bp = self._busy_sample
        if now - last_t >= min_interval_s * 1e9:
            elapsed = now - last_t
            self._busy_ratio = min(1.0, max(0.0, 1.0 - (idle - last_idle) / elapsed - (bp - last_bp) / elapsed))
            self._busy_sample = (now, idle, bp)
        return self._busy_ratio

    def _idle(self, seconds: float) -> None:
        """Sleep on the task thread, counted as idle time."""
        started = time.monotonic_ns()
        time.sleep(seconds)
        self.idle_ns += time.monotonic_ns() - started

    def _run_profiled(self) -> None:
        """Development aid: the task under cProfile, written to $MILLRACE_PROFILE_DIR/<task>.prof."""
        import cProfile

        profiler = cProfile.Profile()
        try:
            profiler.runcall(self._run)
        finally:
            name = "".join(c if c.isalnum() else "_" for c in self.tdd.task_name_with_subtask)
            profiler.dump_stats(os.path.join(os.environ[PROFILE_DIR_ENV], f"{name}-{self.attempt_id[:8]}.prof"))

    def _run(self) -> None:
        chain: OperatorChain | None = None
        try:
            self._transition(ExecutionState.INITIALIZING)
            restore = self.tdd.task_restore
            if restore is not None and restore.deployed_as_finished:
                self._run_deployed_as_finished(restore)
                self.flush_operator_events()
                self._transition(ExecutionState.FINISHED, blocking_partitions=[p.produced() for p in self._partitions if hasattr(p, "produced")])
                return
            chain = self._build_chain()
            self._initialize_state(chain)
            self._chain = chain
            chain.open()
            self._transition(ExecutionState.RUNNING)
            self.log.info("running")
            if self.start_delay_s > 0:  # testing: a slow machine
                self._canceled.wait(self.start_delay_s)
            self._interrupter.open_window()
            try:
                if chain.sources:
                    self._run_source(chain)
                else:
                    self._run_inputs(chain)
            finally:
                self._interrupter.close_window()
            if self._canceled.is_set():
                raise TaskCanceledError("canceled")
            for w in self._writers:
                w.flush_all()
            for p in self._partitions:
                p.finish()
            errors = chain.close()
            chain = None
            if errors:
                raise errors[0]
            blocking = [p.produced() for p in self._partitions if hasattr(p, "produced")]
            self.flush_operator_events()  # the coordinators have every event before FINISHED (a lost one fails the task)
            self._transition(ExecutionState.FINISHED, blocking_partitions=blocking)
            self.log.info("finished: %d records in, %d out", self.metrics.records_in, self.metrics.records_out)
        except BaseException as e:  # noqa: BLE001 - every failure becomes FAILED or CANCELED
            if chain is not None:
                chain.close()
            # an input released under us means its producer was canceled, and this task will be
            # too: cancellation, not failure (Flink: CancelTaskException from a released channel)
            canceled = self._canceled.is_set() or isinstance(e, PartitionReleasedError)
            if canceled:
                if self._canceled.is_set():
                    self._quietly(self._end_snapshots)  # before CANCELED: then nothing of this task is written any more
                for p in self._partitions:
                    self._quietly(p.release)
                # the cause travels along: a job still RUNNING fails with it (canceled unexpectedly)
                released = None if self._canceled.is_set() else ErrorInfo.from_exception(e, task=self.tdd.task_name_with_subtask, task_manager=self.tm_id)
                self._transition(ExecutionState.CANCELED, released)
                self.log.info("canceled%s", f" ({e})" if released else "")
            else:
                op = getattr(e, "__millrace_operator__", None)
                info = ErrorInfo.from_exception(e, task=self.tdd.task_name_with_subtask, operator=op, task_manager=self.tm_id)
                self.log.error("failed: %s", info.describe())
                # reported before the consumers learn of it: the JobMaster then hears this root cause
                # before their echoes of it (ProducerFailedError), and records it as the restart's cause
                self._transition(ExecutionState.FAILED, info)
                for p in self._partitions:
                    self._quietly(p.fail, e)  # consumers learn that their producer failed
        finally:
            self._chain = None
            self._quietly(self._run_control)  # triggers that came too late are declined, not left to time out
            if self._canceled.is_set():
                for pid in list(self._snapshot_writers):  # their checkpoints can no longer complete
                    self._kill_snapshot_writer(pid)
            if self._snapshot_thread is not None:
                self._snapshot_thread.shutdown(wait=False)
            for w in self._writers:
                self._quietly(w.close)
            if self._gate is not None:
                self._quietly(self._gate.close)
            self.on_terminal(self)

    def _build_chain(self) -> OperatorChain:
        writers, network_feeders = self._build_network()
        self.mailbox = TaskMailbox()
        return OperatorChain(
            self.tdd,
            writers,
            network_feeders,
            self.mailbox,
            lambda spec: _EventGateway(self, spec),
            self.metrics,
            self.log,
        )

    @cached_property
    def settings(self) -> TaskSettings:
        """The options this task reads, parsed once from its deployment's config (a pure function
        of the immutable descriptor: whichever thread asks first computes the same value)."""
        return TaskSettings.from_config(self.tdd.config)

    def _build_network(self) -> tuple[dict[str, Any], dict[tuple[int, int], int]]:
        """Result partitions and their writers, and one input gate over every input channel."""
        tdd = self.tdd
        writers: dict[str, Any] = {}
        buffer_timeout = self.settings.buffer_timeout_ms
        for rpdd in tdd.produced_partitions:
            selector = load_user_code(rpdd.partitioner.key_selector) if rpdd.partitioner.key_selector else None
            partition, writer = self.network.create_result_partition(rpdd, tdd.execution_attempt_id, selector, tdd.subtask_index, buffer_timeout)
            self._partitions.append(partition)
            self._writers.append(writer)
            writers[rpdd.dataset_id] = writer
        # one physical gate over all channels; channels map back to logical inputs
        self._logical: list[_LogicalInput] = []
        self._channel_map: list[tuple[_LogicalInput, int]] = []
        network_feeders: dict[tuple[int, int], int] = {}
        if tdd.input_gates:
            from runtime.taskmanager.network import StatusWatermarkValve  # local: network is optional for sources

            by_input: dict[tuple[int, int], list[InputGateDeploymentDescriptor]] = {}
            for g in tdd.input_gates:
                by_input.setdefault((g.target_node_id, g.type_number), []).append(g)
            channels = []
            for (node_id, type_number), gates in by_input.items():
                local_index = 0
                n = sum(len(g.channels) for g in gates)
                li = _LogicalInput(node_id, type_number, n, StatusWatermarkValve)
                self._logical.append(li)
                network_feeders[(node_id, type_number)] = 1
                for g in gates:
                    for ch in g.channels:
                        self._channel_map.append((li, local_index))
                        local_index += 1
                        channels.append(ch)
            first = tdd.input_gates[0]
            merged = InputGateDeploymentDescriptor(
                dataset_id=first.dataset_id, target_node_id=first.target_node_id, type_number=first.type_number, channels=channels
            )
            self._gate = self.network.create_input_gate(merged)
        return writers, network_feeders

    def _run_deployed_as_finished(self, restore: TaskRestore) -> None:
        """FLIP-147: every operator of this subtask had finished in the restored checkpoint (Flink:
        a task deployed as finished). None of them runs again: the task takes the EndOfPartition of
        each input (its producers finished too) and ends its own outputs, so consumers see the
        input end as it did before the failure."""
        self._build_network()
        self._transition(ExecutionState.RUNNING)
        self.log.info("deployed as finished (its operators finished before checkpoint %d): ending its outputs", restore.checkpoint_id)
        gate = self._gate
        if gate is not None:
            ended: set[int] = set()
            while len(ended) < gate.num_channels and not self._canceled.is_set():
                self._run_control()  # triggers are declined: nothing here takes part in checkpoints
                item = gate.poll_next(_POLL_CAP_S)
                if item is None:
                    continue
                channel, element = item
                if isinstance(element, EndOfPartition):
                    ended.add(channel)
                elif isinstance(element, RecordBatch):
                    raise MillraceError(
                        f"task {self.tdd.task_name_with_subtask} was restored as finished, but an upstream task sent it records: "
                        "the checkpoint recorded this task finished and its producer not"
                    )
        if self._canceled.is_set():
            raise TaskCanceledError("canceled")
        for w in self._writers:
            w.flush_all()
        for p in self._partitions:
            p.finish()

    def _run_source(self, chain: OperatorChain) -> None:
        if len(chain.sources) != 1 or self._gate is not None:
            raise MillraceError(f"task {self.tdd.task_name_with_subtask}: a source task has exactly one source and no inputs")
        member = chain.sources[0]
        src = cast(SourceOperator, member.operator)  # chain.sources are the members whose operator is one
        mailbox = self.mailbox
        canceled = self._canceled
        control = self._control
        savepoint_at_end = self.settings.end_of_input_savepoint
        while not canceled.is_set():
            if control:
                self._run_control()
            # nothing may follow a stop-with-savepoint barrier, not even what a processing-time timer
            # emits (a periodic watermark would fire windows after their snapshot; Flink quiesces
            # the timer service); an ended input waits for its savepoint
            if self._held_for_savepoint is not None or self._at_end_of_input:
                self._idle(0.005)
                continue
            mailbox.run_due()
            try:
                status = src.emit_next()
            except BaseException as e:
                annotate(e, member.spec.name)
                raise
            if status is InputStatus.END_OF_INPUT:
                if not savepoint_at_end:
                    break
                # execution.end-of-input.savepoint: hold here; the JobMaster stops the job with a
                # drained savepoint once every source is here (the job FINISHES from that stop)
                self._at_end_of_input = True
                self.send_operator_event(SourceReachedEndOfInput(job_id=self.tdd.job_id, execution_attempt_id=self.tdd.execution_attempt_id))
                self.log.info("end of input: holding for the final savepoint")
                continue
            if status is InputStatus.NOTHING_AVAILABLE:
                self._idle(mailbox.seconds_until_next(0.01))
        if canceled.is_set():
            return
        # a bounded source ends event time (Flink's SourceOperator emits MAX_WATERMARK at the end)
        assert src.output is not None
        src.output.emit_watermark(Watermark(MAX_TIMESTAMP))
        chain.finish_operator(member.spec.node_id)

    def _run_inputs(self, chain: OperatorChain) -> None:
        gate, mailbox, canceled, metrics = self._gate, self.mailbox, self._canceled, self.metrics
        channel_map = self._channel_map
        heads = {(li.node_id, li.type_number): chain.operator(li.node_id) for li in self._logical}
        remaining = len(self._logical)
        control = self._control
        barriers = self._barrier_handler = self._create_barrier_handler(gate)
        while remaining and not canceled.is_set():
            # after a stop-with-savepoint barrier no timer runs: a periodic watermark would fire
            # windows after their snapshot (Flink quiesces the timer service of a synchronous savepoint)
            held = self._held_for_savepoint is not None
            if not held:
                mailbox.run_due()
            if control:
                self._run_control()
            item = gate.poll_next(_POLL_CAP_S if held else mailbox.seconds_until_next(_POLL_CAP_S))
            if item is None:
                continue
            channel, element = item
            li, local_ch = channel_map[channel]
            op = heads[(li.node_id, li.type_number)]
            try:
                if isinstance(element, RecordBatch):
                    metrics.records_in += len(element)
                    metrics.bytes_in += estimate_nbytes(element)
                    op.process_batch(element, li.type_number)
                elif isinstance(element, Watermark):
                    wm = li.valve.input_watermark(local_ch, element.timestamp)
                    if wm is not None:
                        op.process_watermark(Watermark(wm), li.type_number)
                elif isinstance(element, WatermarkStatus):
                    wm, idle = li.valve.input_status(local_ch, element.idle)
                    if wm is not None:
                        op.process_watermark(Watermark(wm), li.type_number)
                    if idle is not None:
                        op.process_watermark_status(WatermarkStatus(idle), li.type_number)
                elif isinstance(element, CheckpointBarrier):
                    barriers.process_barrier(channel, element)
                elif isinstance(element, EndOfPartition):
                    barriers.process_end_of_partition(channel)
                    wm = li.valve.channel_finished(local_ch)
                    if wm is not None:
                        op.process_watermark(Watermark(wm), li.type_number)
                    li.open_channels -= 1
                    if li.open_channels == 0:
                        remaining -= 1
                        chain.end_input(li.node_id, li.type_number)
                else:
                    self.on_event(element)
            except BaseException as e:
                annotate(e, chain.name_of(li.node_id))
                raise

    def on_event(self, event: Any) -> None:
        """Other in-band events: none are known yet."""
        raise MillraceError(f"task {self.tdd.task_name_with_subtask}: unexpected event {event!r}")

    # --- state and checkpoints (Flink: StreamTask + SubtaskCheckpointCoordinator) ---------------
    def _initialize_state(self, chain: OperatorChain) -> None:
        """Every operator gets its restored state (or an empty context) after setup, before open."""
        tdd = self.tdd
        restore = tdd.task_restore
        kgr = compute_key_group_range_for_operator_index(tdd.max_parallelism, tdd.parallelism, tdd.subtask_index)
        for spec in tdd.operators:
            op_id = spec.operator_id
            files = restore.operator_files.get(op_id) if restore is not None else None
            if restore is not None and files:
                from runtime.storage.state_files import read_operator_state  # pyarrow only; not for every task

                state_dir = restore.state_dir or tdd.checkpoint_dir
                assert state_dir is not None
                ctx = read_operator_state(state_dir, files, op_id, kgr, tdd.subtask_index, tdd.parallelism)
                ctx.restored_checkpoint_id = restore.checkpoint_id
            else:
                restored_id = restore.checkpoint_id if restore is not None and op_id in restore.restored_operators else None
                ctx = StateInitializationContext(restored_checkpoint_id=restored_id)
            chain._guard(spec.name, chain.operator(spec.node_id).initialize_state, ctx)
        if restore is not None:
            self.log.info("restored from checkpoint %d", restore.checkpoint_id)

    def _create_barrier_handler(self, gate: Any) -> Any:
        from runtime.taskmanager.checkpoint_barrier_handler import create_barrier_handler

        return create_barrier_handler(
            self.settings.checkpointing_mode, gate.num_channels, gate, self._perform_checkpoint, self._on_checkpoint_aborted_in_alignment, logger=self.log
        )

    def _run_control(self) -> None:
        while self._control:
            self._control.popleft()()

    def trigger_checkpoint(self, checkpoint_id: int, timestamp_ms: int, mode: str, savepoint: SavepointOptions | None = None) -> bool:
        """Any thread: a source task injects barrier `checkpoint_id` at its next step; a task with
        inputs is triggered once every upstream task finished (FLIP-147) and takes the barrier at
        the end of its channels still open. False: not running."""
        if self.machine.state is not ExecutionState.RUNNING or self._canceled.is_set():
            return False
        barrier = CheckpointBarrier(
            checkpoint_id, timestamp_ms, CheckpointingMode(mode), savepoint.target if savepoint else None,
            synchronous=savepoint is not None and savepoint.stop,
        )
        if self.tdd.input_gates:
            self._control.append(lambda: self._trigger_at_unfinished_channels(barrier))
        elif savepoint is not None and savepoint.stop:
            self._control.append(lambda: self._stop_with_savepoint(barrier, savepoint.drain))
        else:
            self._control.append(lambda: self._perform_checkpoint(barrier))
        return True

    def deliver_operator_event(self, node_id: int, event: Any) -> bool:
        """Any thread: an operator coordinator's event for operator `node_id` (a split assignment),
        handed to the operator on the task thread between inputs, in the order delivered. False: the
        task is not running (the coordinator learns of its end through the scheduler). A reader
        registers while its chain opens (INITIALIZING): its first splits may come before RUNNING."""
        if self.machine.state not in (ExecutionState.INITIALIZING, ExecutionState.RUNNING) or self._canceled.is_set():
            return False
        self._control.append(lambda: self._handle_operator_event(node_id, event))
        return True

    def _handle_operator_event(self, node_id: int, event: Any) -> None:
        chain = self._chain
        if chain is None:
            return
        try:
            chain.operator(node_id).handle_operator_event(event)
        except BaseException as e:
            annotate(e, chain.name_of(node_id))
            raise

    def _stop_with_savepoint(self, barrier: CheckpointBarrier, drain: bool) -> None:
        """Task thread of a source: (drain: a MAX watermark, so every event-time window fires), the
        barrier, then nothing more until the savepoint completes (the JobMaster then ends the job)
        or aborts (the source goes on)."""
        chain = self._chain
        if chain is not None and drain:
            for member in chain.sources:
                assert member.operator.output is not None
                member.operator.output.emit_watermark(Watermark(MAX_TIMESTAMP))
        self._perform_checkpoint(barrier)  # holds the source: it emits nothing more

    def _trigger_at_unfinished_channels(self, barrier: CheckpointBarrier) -> None:
        """Task thread: the barrier handler exists while the inputs are read; a trigger that comes
        after they all ended (the task is finishing) is declined."""
        handler = self._barrier_handler
        if handler is None or self._chain is None:
            self._decline(barrier.checkpoint_id, f"{self.tdd.task_name_with_subtask} is no longer running", counts_as_failure=False)
            return
        handler.trigger_at_unfinished_channels(barrier)

    def notify_checkpoint(self, checkpoint_id: int, completed: bool) -> None:
        """Any thread: checkpoint complete or aborted; operators hear it on the task thread."""
        self._control.append(lambda: self._notify_operators(checkpoint_id, completed))

    def _notify_operators(self, checkpoint_id: int, completed: bool) -> None:
        if not completed:
            self._aborted_checkpoints.append(checkpoint_id)  # a barrier arriving after its abort must not hold the task
        if not completed and checkpoint_id == self._held_for_savepoint:
            self._held_for_savepoint = None  # the stop failed: the job goes on
            self.log.info("stop-with-savepoint %d aborted: the task resumes (its timers too)", checkpoint_id)
        chain = self._chain
        if chain is None:
            return
        for spec in self.tdd.operators:
            op = chain.operator(spec.node_id)
            fn = op.notify_checkpoint_complete if completed else op.notify_checkpoint_aborted
            chain._guard(spec.name, fn, checkpoint_id)

    def _on_checkpoint_aborted_in_alignment(self, checkpoint_id: int, reason: str) -> None:
        self.log.info("checkpoint %d aborted during alignment: %s", checkpoint_id, reason)
        self._decline(checkpoint_id, reason, counts_as_failure=False)

    def _perform_checkpoint(self, barrier: CheckpointBarrier) -> None:
        """Task thread: the synchronous part (cheap copies), the barrier downstream, then the rest off-thread."""
        chain = self._chain
        if chain is None or self._canceled.is_set():
            self._decline(barrier.checkpoint_id, f"{self.tdd.task_name_with_subtask} is no longer running", counts_as_failure=False)
            return
        if barrier.synchronous and barrier.checkpoint_id not in self._aborted_checkpoints:
            # a stop-with-savepoint: from this snapshot on the task runs no processing-time timer and
            # a source emits nothing, until the job ends it or the savepoint fails (Flink: a
            # synchronous savepoint); set before the snapshot, so nothing runs in between
            self._held_for_savepoint = barrier.checkpoint_id
            self.log.info("stop-with-savepoint %d: timers quiesced until the savepoint completes", barrier.checkpoint_id)
        t0 = time.monotonic()
        state_dir = barrier.target_location or self.tdd.checkpoint_dir  # a savepoint's own table, or the job's
        since_trigger_ms = int(time.time() * 1000) - barrier.timestamp  # wall clocks (one machine or NTP), as Flink
        snapshots: dict[str, OperatorSnapshot] = {}
        fork = self._fork_next_snapshot
        # a savepoint is canonical (any backend restores it); a checkpoint may be a backend's native format
        with copy_on_write_snapshot() if fork else contextlib.nullcontext(), canonical_snapshot() if barrier.target_location else contextlib.nullcontext():
            for spec in self.tdd.operators:
                snap = chain._guard(spec.name, chain.operator(spec.node_id).snapshot_state, barrier.checkpoint_id)
                if snap is not None:
                    snapshots[spec.operator_id] = snap
        for w in self._writers:
            w.broadcast_event(barrier)  # records before the barrier are flushed before it
        try:
            shared = self._shared_files(barrier.checkpoint_id, snapshots)
        except SharedStateUnknownError as e:  # not a failure of the job's state: the next checkpoint is full
            self.log.warning("%s", e)
            self._decline(barrier.checkpoint_id, f"{self.tdd.task_name_with_subtask}: {e}", counts_as_failure=False)
            return
        # fork here, on the task thread, so the child's copy-on-write image is a consistent state
        try:
            child = self._fork_snapshot_writer(barrier.checkpoint_id, snapshots, state_dir) if fork else None
        except MillraceError as e:
            self.log.warning("%s", e)
            self._decline(barrier.checkpoint_id, str(e))
            return
        sync_ms = int((time.monotonic() - t0) * 1000)
        alignment_ms = getattr(self._barrier_handler, "last_alignment_ms", 0) if self._barrier_handler is not None else 0
        if self._snapshot_thread is None:
            self._snapshot_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"snapshot-{self.tdd.task_name_with_subtask}")
        start_delay_ms = max(0, since_trigger_ms - alignment_ms)  # until the first barrier arrived
        self._snapshot_thread.submit(
            self._write_and_acknowledge, barrier.checkpoint_id, snapshots, state_dir, sync_ms, alignment_ms, child, start_delay_ms, shared
        )

    def operator_objects(self) -> list[tuple[str, object]]:
        """(name, operator) of each operator of the running chain; what the per-slot heap check walks from."""
        chain = self._chain
        if chain is None:
            return []
        return [(spec.name, chain.operator(spec.node_id)) for spec in self.tdd.operators]

    @property
    def _fork_next_snapshot(self) -> bool:
        """state.snapshot.async-mode: fork, thread, or auto (the default where fork exists: fork
        unless the last state file was small); see docs/fault_tolerance.md."""
        return self.settings.fork_snapshot_of(self._last_state_bytes)

    def _fork_snapshot_writer(self, checkpoint_id: int, snapshots: dict[str, OperatorSnapshot], state_dir: str | None) -> tuple[int, int] | None:
        """Serialise and write the state file in a forked child (its own core, no GIL shared with this task).

        Like Redis' BGSAVE: the child sees the state as it was at the fork (copy-on-write) while
        this task goes on. Returns (pid, read end of the pipe the child reports on), or None when
        there is nothing to write. A failed fork fails the snapshot (the state was not pinned).
        """
        stateful = {op: s for op, s in snapshots.items() if s.keyed or s.operator_lists or s.union_lists or s.native is not None}
        if not stateful or state_dir is None:
            return None
        from runtime.storage.state_files import write_state_file  # imported before fork, not in the child

        tdd = self.tdd
        deadline_s = self._snapshot_writer_deadline_s()
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError as e:
            os.close(r)
            os.close(w)
            # the suppliers read live state (nothing was pinned): fail this checkpoint, the next one may fork
            raise MillraceError(f"checkpoint {checkpoint_id}: could not fork the snapshot writer: {e}") from e
        if pid == 0:  # the child: only this thread exists here; touch nothing shared, never return
            code = 1
            try:
                # never outlive the checkpoint, even orphaned by a killed TaskManager or stuck in a library
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(deadline_s)
                mark_forked_snapshot_writer()
                gc.disable()  # a collection would touch (and copy) every object
                os.close(r)
                handle = write_state_file(state_dir, checkpoint_id, tdd.subtask_index, tdd.attempt_number, tdd.parallelism, stateful)
                os.write(w, b"OK" + (handle.model_dump_json().encode() if handle is not None else b"null"))
                code = 0
            except BaseException as e:  # noqa: BLE001 - reported to the parent, which declines
                try:
                    os.write(w, b"ER" + repr(e).encode()[:4000])
                except BaseException:  # noqa: BLE001 - the parent sees the pipe close without a result and declines
                    pass
            finally:
                os._exit(code)
        os.close(w)
        self._snapshot_writers.add(pid)
        for snap in stateful.values():
            snap.keyed = {}  # the child writes the state: the parent drops its pinned copy now
            snap.operator_lists, snap.union_lists = {}, {}
        return pid, r

    @staticmethod
    def _kill_snapshot_writer(pid: int) -> None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def _snapshot_writer_deadline_s(self) -> int:
        """The checkpoint timeout: a writer still running then is useless (the checkpoint has expired)."""
        return max(5, self.settings.checkpoint_timeout_ms // 1000 + 1)

    def _await_snapshot_writer(self, child: tuple[int, int]) -> StateFileHandle | None:
        """Snapshot thread: the writer's report, waiting at most until its deadline (then it is killed)."""
        pid, r = child
        chunks = []
        deadline = time.monotonic() + self._snapshot_writer_deadline_s()
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([r], [], [], left)[0]:
                    self._kill_snapshot_writer(pid)
                    raise MillraceError(f"the snapshot writer process {pid} did not finish in time and was killed")
                chunk = os.read(r, 65536)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            os.close(r)
            status = None
            try:
                status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            except ChildProcessError:
                pass
            self._snapshot_writers.discard(pid)
        out = b"".join(chunks)
        if out.startswith(b"OK"):
            body = out[2:]
            return None if body == b"null" else StateFileHandle.model_validate_json(body)
        died = f"it died (exit status {status}; a negative status is the signal)"
        raise MillraceError(f"the snapshot writer process {pid} failed: {out[2:].decode(errors='replace') or died}")

    def _write_and_acknowledge(
        self, checkpoint_id: int, snapshots: dict[str, OperatorSnapshot], state_dir: str | None, sync_ms: int, alignment_ms: int,
        child: tuple[int, int] | None = None, start_delay_ms: int = 0, shared: dict[str, list[str]] | None = None,
    ) -> None:
        """Snapshot thread: serialise and write the state file, then acknowledge (or decline) to the JobMaster."""
        tdd = self.tdd
        t0 = time.monotonic()
        try:
            committables = {op: cloudpickle.dumps(s.committables) for op, s in snapshots.items() if s.committables is not None}
            files = []
            stateful = {op: s for op, s in snapshots.items() if s.keyed or s.operator_lists or s.union_lists or s.native is not None}
            shared = shared or {}
            if child is not None:
                handle = self._await_snapshot_writer(child)
                if handle is not None:
                    files.append(handle)
            elif stateful:
                from runtime.storage.state_files import THREAD_BATCH_ROWS, write_state_file

                if state_dir is None:
                    raise MillraceError(f"task {tdd.task_name_with_subtask}: checkpoint {checkpoint_id} has no checkpoint directory")
                handle = write_state_file(
                    state_dir, checkpoint_id, tdd.subtask_index, tdd.attempt_number, tdd.parallelism, stateful, batch_rows=THREAD_BATCH_ROWS
                )
                if handle is not None:
                    files.append(handle)
            if state_dir == tdd.checkpoint_dir:
                self._last_state_bytes = sum(f.size for f in files)
                if files:
                    self._remember_state_file(checkpoint_id, files[0].path, shared)
            ack = AcknowledgeCheckpoint(
                job_id=tdd.job_id, execution_attempt_id=tdd.execution_attempt_id, checkpoint_id=checkpoint_id,
                state=TaskStateSnapshot(files=files, committables=committables, shared_files=shared),
                sync_ms=sync_ms, async_ms=int((time.monotonic() - t0) * 1000), alignment_ms=alignment_ms,
                start_delay_ms=start_delay_ms,
            )
        except Exception as e:  # noqa: BLE001 - a failed snapshot declines the checkpoint; the task goes on
            self.log.warning("checkpoint %d: snapshot failed: %r", checkpoint_id, e)
            if child is not None:  # a forked writer that died or was killed may have left its file or a temp file
                self._discard_snapshot(checkpoint_id, state_dir)
            self._decline(checkpoint_id, f"{tdd.task_name_with_subtask}: snapshot failed: {e!r}")
            return
        if self._canceled.is_set():
            # written after the task was cancelled: its checkpoint can never complete, and the
            # JobMaster may have cleaned up already, or be gone (Flink: a cancelled
            # AsyncCheckpointRunnable discards its state)
            self._discard_snapshot(checkpoint_id, state_dir)
            return
        if self.checkpoint_response is not None:
            try:
                self.checkpoint_response(ack)
            except Exception as e:  # noqa: BLE001 - the JobMaster aborts the checkpoint by timeout then
                self.log.warning("checkpoint %d: acknowledgement failed: %s", checkpoint_id, e)

    def _discard_snapshot(self, checkpoint_id: int, state_dir: str | None) -> None:
        """Snapshot thread: delete what this attempt wrote for a checkpoint it will not acknowledge
        (a savepoint's folder too, once empty and never committed)."""
        if state_dir is None:
            return
        from runtime.storage.savepoints import discard_task_snapshot

        tdd = self.tdd
        try:
            gone = discard_task_snapshot(state_dir, state_dir != tdd.checkpoint_dir, checkpoint_id, tdd.subtask_index, tdd.attempt_number)
        except Exception as e:  # noqa: BLE001 - left-over files are garbage, not damage
            self.log.warning("checkpoint %d: could not delete the snapshot files of this cancelled task: %s", checkpoint_id, e)
            return
        if gone:
            self.log.info("checkpoint %d: deleted %d snapshot file(s) that can no longer be part of it", checkpoint_id, len(gone))

    def _end_snapshots(self) -> None:
        """A cancelled task's snapshots can never complete: forked writers are killed, and a writer
        thread is waited for (at most SNAPSHOT_CANCEL_WAIT_S), each deleting what it wrote, so that
        CANCELED means no more files from this task (the JobMaster cleans up before that)."""
        for pid in list(self._snapshot_writers):
            self._kill_snapshot_writer(pid)
        pool = self._snapshot_thread
        if pool is None:
            return
        try:
            last = pool.submit(lambda: None)  # one worker: done once every snapshot before it is
        except RuntimeError:  # shut down already
            return
        pool.shutdown(wait=False)
        try:
            last.result(timeout=SNAPSHOT_CANCEL_WAIT_S)
        except Exception:  # noqa: BLE001 - a writer still busy deletes its file itself when it is done
            self.log.warning("a snapshot writer is still busy %.0f s after the cancel; it deletes its file when done", SNAPSHOT_CANCEL_WAIT_S)

    def _shared_files(self, checkpoint_id: int, snapshots: dict[str, OperatorSnapshot]) -> dict[str, list[str]]:
        """Task thread, before the snapshot is written: the paths of the earlier state files each
        operator's snapshot builds on (recorded by the snapshot thread, which acknowledged them
        before the checkpoint they belong to could complete, so before this one was triggered)."""
        out: dict[str, list[str]] = {}
        for op, snap in snapshots.items():
            if not snap.shared_checkpoints:
                continue
            missing = [c for c in snap.shared_checkpoints if c not in self._state_file_paths]
            if missing:  # e.g. a late notification named a chain this attempt no longer tracks
                raise SharedStateUnknownError(
                    f"checkpoint {checkpoint_id} of operator {op!r} builds on checkpoint(s) {missing}, whose state files "
                    f"this task does not know; the next checkpoint is a full one"
                )
            out[op] = [self._state_file_paths[c] for c in snap.shared_checkpoints]
        return out

    def _remember_state_file(self, checkpoint_id: int, path: str, shared: dict[str, list[str]]) -> None:
        """Keep the paths a later incremental checkpoint may name; those older than every chain in use go."""
        self._state_file_paths[checkpoint_id] = path
        in_use = {path, *(p for paths in shared.values() for p in paths)}
        floor = min(c for c, p in self._state_file_paths.items() if p in in_use)
        for c in [c for c in self._state_file_paths if c < floor]:
            del self._state_file_paths[c]

    def _decline(self, checkpoint_id: int, reason: str, counts_as_failure: bool = True) -> None:
        if self.checkpoint_response is None:
            return
        tdd = self.tdd
        msg = DeclineCheckpoint(
            job_id=tdd.job_id, execution_attempt_id=tdd.execution_attempt_id, checkpoint_id=checkpoint_id,
            reason=reason, counts_as_failure=counts_as_failure,
        )
        try:
            self.checkpoint_response(msg)
        except Exception as e:  # noqa: BLE001 - the JobMaster may be gone; it aborts the checkpoint by timeout then
            self.log.warning("checkpoint %d: decline failed: %s", checkpoint_id, e)
