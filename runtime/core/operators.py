"""The operator contract between the API (what operators do) and the TaskManager (who runs them).

A task thread drives one chain of operators: it calls `process_batch` / `process_watermark` /
`end_input` on the chain's head operators for network input, and `emit_next` on a source.
Operators pass results on through `Output`; inside a chain that is a direct call to the next
operator (no queue, no serialization). Everything here runs on the task thread only.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from runtime.core.checkpoint import OperatorSnapshot, StateInitializationContext
from runtime.core.keygroups import KeyGroupRange
from runtime.core.records import MIN_TIMESTAMP, RecordBatch, Watermark, WatermarkStatus


class Output(Protocol):
    def emit(self, batch: RecordBatch) -> None: ...

    def emit_watermark(self, watermark: Watermark) -> None: ...

    def emit_side(self, tag: str, batch: RecordBatch) -> None:
        """Records for the side output `tag` (an OutputTag's id); dropped if nothing consumes it."""

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        """This output goes idle (no records for a while: it holds back no watermark) or active again."""


class ProcessingTimeService(Protocol):
    """Wall-clock time and timers whose callbacks run on the task thread (the mailbox)."""

    def current_processing_time(self) -> int: ...

    def register_timer(self, timestamp_ms: int, callback: Callable[[int], None]) -> Any: ...


class OperatorEventGateway(Protocol):
    """Sends an event from an operator subtask to its OperatorCoordinator on the JobMaster."""

    def send_event_to_coordinator(self, event: Any) -> None: ...


class TaskMetrics:
    """Counters a task reports to the JobMaster (records/bytes in and out)."""

    __slots__ = ("records_in", "records_out", "bytes_in", "bytes_out")

    def __init__(self) -> None:
        self.records_in = 0
        self.records_out = 0
        self.bytes_in = 0
        self.bytes_out = 0


@dataclass
class OperatorContext:
    """Everything the runtime gives an operator at setup."""

    job_id: str
    job_name: str
    task_name: str
    operator_name: str
    node_id: int
    uid: str | None
    subtask_index: int
    parallelism: int
    max_parallelism: int
    attempt_number: int
    key_group_range: KeyGroupRange
    output: Output
    processing_time_service: ProcessingTimeService
    event_gateway: OperatorEventGateway
    config: dict[str, str] = field(default_factory=dict)
    logger: logging.LoggerAdapter | None = None
    metrics: TaskMetrics = field(default_factory=TaskMetrics)


class StreamOperator:
    """Base class of every operator. Subclasses override the hooks they need."""

    num_inputs = 1

    def __init__(self) -> None:
        self.ctx: OperatorContext | None = None
        self.output: Output | None = None
        self._input_watermarks: list[int] = []
        self._input_idle: list[bool] = []
        self._current_watermark = MIN_TIMESTAMP

    # lifecycle -----------------------------------------------------------------------------
    def setup(self, ctx: OperatorContext) -> None:
        self.ctx = ctx
        self.output = ctx.output
        self._input_watermarks = [MIN_TIMESTAMP] * max(1, self.num_inputs)
        self._input_idle = [False] * max(1, self.num_inputs)

    def open(self) -> None:
        """Called once before the first element (user functions' open() runs here)."""

    def finish(self) -> None:
        """All inputs ended: flush what is buffered (e.g. fire remaining windows)."""

    def close(self) -> None:
        """Release resources; called on success and on failure/cancel."""

    # state and checkpoints (see runtime.core.checkpoint for the contract) -----------------------
    def initialize_state(self, context: StateInitializationContext) -> None:
        """After setup, before open: restore from `context` (empty on a fresh start)."""

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot | None:
        """Synchronous part of a checkpoint, on the task thread: cheap copies only. None: no state."""
        return None

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` (and every earlier one) is complete and durable."""

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:
        """Checkpoint `checkpoint_id` was discarded (timeout, decline, failure)."""

    def handle_operator_event(self, event: Any) -> None:
        """An event from this operator's coordinator (Flink: OperatorEventHandler), on the task thread."""
        raise TypeError(f"{type(self).__name__} takes no operator events (got {type(event).__name__})")

    # data ----------------------------------------------------------------------------------
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        raise NotImplementedError

    def process_watermark(self, watermark: Watermark, input_index: int = 0) -> None:
        """Combine per-input watermarks (min over the inputs that are not idle) and advance when it moves."""
        wms = self._input_watermarks
        if watermark.timestamp > wms[input_index]:
            wms[input_index] = watermark.timestamp
        self._advance_combined()

    def _advance_combined(self) -> None:
        wms, idle = self._input_watermarks, self._input_idle
        counted = [w for w, i in zip(wms, idle) if not i] if any(idle) else wms
        if not counted:
            return
        combined = min(counted)
        if combined > self._current_watermark:
            self._current_watermark = combined
            self.on_watermark(combined)

    def process_watermark_status(self, status: WatermarkStatus, input_index: int = 0) -> None:
        """An input went idle or active (Flink: processWatermarkStatus): an idle input holds back no
        watermark; the operator's output is idle while all its inputs are."""
        idle = self._input_idle
        was_idle = all(idle)
        idle[input_index] = status.idle
        if not status.idle:
            return self._status_changed(was_idle)
        self._advance_combined()
        self._status_changed(was_idle)

    def _status_changed(self, was_idle: bool) -> None:
        now_idle = all(self._input_idle)
        if now_idle != was_idle and self.output is not None:
            self.output.emit_watermark_status(WatermarkStatus(now_idle))

    def on_watermark(self, timestamp: int) -> None:
        """Event time advanced to `timestamp` (fire timers, then forward)."""
        assert self.output is not None
        self.output.emit_watermark(Watermark(timestamp))

    def end_input(self, input_index: int = 0) -> None:
        """Input `input_index` has no more data (bounded input)."""

    @property
    def current_watermark(self) -> int:
        return self._current_watermark


class InputStatus(enum.Enum):
    MORE_AVAILABLE = "MORE_AVAILABLE"
    NOTHING_AVAILABLE = "NOTHING_AVAILABLE"
    END_OF_INPUT = "END_OF_INPUT"


class SourceOperator(StreamOperator):
    """A source is pulled by its task: `emit_next` emits at most one batch per call."""

    num_inputs = 0

    def emit_next(self) -> InputStatus:
        raise NotImplementedError

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        raise TypeError("a source has no inputs")


class OperatorCoordinatorContext(Protocol):
    """What an operator coordinator may ask of the scheduler (Flink: OperatorCoordinator.Context)."""

    @property
    def job_id(self) -> str: ...

    @property
    def operator_id(self) -> str:
        """The operator's state id (its uid, or the generated one): stable across runs."""
        ...

    @property
    def operator_name(self) -> str: ...

    def current_parallelism(self) -> int:
        """The operator's parallelism now (it changes with adaptive batch and with a rescale)."""
        ...

    def fail_job(self, cause: BaseException) -> None:
        """Fail the whole job with `cause` (a global failover; the restart strategy decides)."""
        ...

    def send_event(self, subtask: int, attempt: int, event: Any) -> None:
        """Send `event` to attempt `attempt` of `subtask` (its `handle_operator_event`, on its task
        thread), in order, after what was sent before; dropped if that attempt is no longer the
        current one. Events sent after the coordinator's checkpoint reach the subtask after it took
        that checkpoint (Flink's event valve), so a coordinator's state and its subtasks' agree."""
        ...

    def execute(self, fn: Callable[[], None]) -> None:
        """Run `fn` on the coordinator's thread (the JobMaster's main thread); callable from any thread."""
        ...

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        """Run `fn` on the coordinator's thread after `delay_s`; the handle has `cancel()`."""
        ...


@dataclass
class FixedCoordinatorContext:
    """A context with a fixed parallelism that cannot fail a job: for a coordinator used outside a
    scheduler (unit tests, tools). `fail_job` raises the cause where it is called; sent events are
    kept in `sent` as (subtask, attempt, event); `execute` runs at once; timers wait in `timers`
    until `run_timers()`."""

    job_id: str
    operator_name: str
    parallelism: int = 1
    operator_id: str = ""
    sent: list[tuple[int, int, Any]] = field(default_factory=list)
    timers: list[tuple[float, Callable[[], None]]] = field(default_factory=list)

    def current_parallelism(self) -> int:
        return self.parallelism

    def fail_job(self, cause: BaseException) -> None:
        raise cause

    def send_event(self, subtask: int, attempt: int, event: Any) -> None:
        self.sent.append((subtask, attempt, event))

    def execute(self, fn: Callable[[], None]) -> None:
        fn()

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        entry = (delay_s, fn)
        self.timers.append(entry)

        class _Handle:
            def cancel(_self) -> None:
                if entry in self.timers:
                    self.timers.remove(entry)

        return _Handle()

    def run_timers(self) -> int:
        """Run the timers due now (all that are set), as the JobMaster's loop would; returns how many ran."""
        due, self.timers = self.timers, []
        for _, fn in due:
            fn()
        return len(due)


class OperatorCoordinator:
    """Runs on the JobMaster, one per operator (all its subtasks); Flink's OperatorCoordinator.

    Every hook has a no-op default, so a coordinator overrides only what it needs and the scheduler
    calls every hook on every coordinator without probing for it. Hooks run on the JobMaster's main
    thread or its I/O thread, never concurrently with each other. Used by sinks that commit
    globally (Delta, files) and by the collect sink.
    """

    # speculative execution: the coordinator keeps each attempt's events apart and uses the winner's
    # only (Flink: OperatorCoordinator.supportsConcurrentExecutionAttempts)
    supports_concurrent_execution_attempts: ClassVar[bool] = False

    def __init__(self, context: OperatorCoordinatorContext) -> None:
        self.context = context

    @property
    def job_id(self) -> str:
        return self.context.job_id

    @property
    def operator_name(self) -> str:
        return self.context.operator_name

    @property
    def parallelism(self) -> int:
        return self.context.current_parallelism()

    def start(self) -> None:
        """Called once before any task of the operator runs."""

    def close(self) -> None:
        """The job ended (any way): release what the coordinator holds."""

    def handle_event_from_operator(self, subtask: int, attempt: int, event: Any) -> None:
        """An OperatorEvent one subtask attempt sent."""

    def handle_coordination_request(self, request: Any) -> Any:
        """A client's request (Flink: CoordinationRequestHandler); the answer goes back to it."""
        raise NotImplementedError(f"the coordinator of '{self.operator_name}' takes no coordination requests")

    def execution_attempt_failed(self, subtask: int, attempt: int) -> None:
        """A subtask attempt failed or lost a speculative race: drop what it sent."""

    def checkpoint_coordinator(self, checkpoint_id: int) -> bytes | None:
        """The coordinator's own state for checkpoint `checkpoint_id` (Flink: checkpointCoordinator),
        taken before any subtask is triggered; None: no state. Stored in the checkpoint's metadata."""
        return None

    def reset_coordinator(self, checkpoint_id: int | None, state: bytes | None) -> None:
        """Every subtask restarts from `checkpoint_id` (None: from scratch): go back to the `state`
        this coordinator returned for it (None: none was taken; start afresh)."""

    def subtask_reset(self, subtask: int, checkpoint_id: int | None) -> None:
        """Only `subtask` restarts, from `checkpoint_id` (None: from scratch), while this coordinator
        goes on: take back what it handed that subtask after that checkpoint (Flink: subtaskReset)."""

    def notify_checkpoint_complete(self, checkpoint_id: int, committables: list[Any]) -> None:
        """Checkpoint `checkpoint_id` is durable; `committables` are the subtasks' (all subtasks, in
        subtask order): a two-phase-commit sink commits them here."""

    def reset_to_checkpoint(self, checkpoint_id: int | None, committables: list[Any], subtasks: set[int] | None = None) -> None:
        """The operator's `subtasks` (None: all) restart from `checkpoint_id` (None: from scratch);
        that checkpoint's committables that were never committed must be committed now."""

    def final_committables(self, subtasks: set[int]) -> dict[int, Any]:
        """FLIP-147: what finished `subtasks` sent that no checkpoint committed yet, by subtask."""
        return {}

    def retain_for_restore(self, checkpoint_id: int, committables: list[Any]) -> None:
        """The job ends without finishing and a later run may restore `checkpoint_id`: keep what it references."""

    def on_job_finished(self) -> dict[str, Any]:
        """Every task finished: commit. Returns metadata (e.g. the Delta version) for the job result."""
        return {}


class OperatorCoordinatorProvider(Protocol):
    """Creates the coordinator on the JobMaster (Flink: OperatorCoordinator.Provider); pickled with the JobGraph."""

    def create(self, context: OperatorCoordinatorContext) -> OperatorCoordinator: ...
