"""The source's operator coordinator: hosts the SplitEnumerator on the JobMaster (Flink: SourceCoordinator).

It relays reader events to the enumerator, sends its assignments to the readers (through the
scheduler's event valve: an assignment made after a checkpoint of this coordinator reaches the
reader after the reader's own snapshot), and keeps a `SplitAssignmentTracker` so a reader that
fails gets back, through the enumerator, the splits handed to it after the checkpoint it restarts
from. Its checkpoint is the enumerator's state; a global restart restores the enumerator from it.

`call_async` work (split discovery: listing files, reading a table's log) runs on one thread of
its own, its handler on the coordinator's thread; results of an enumerator that was replaced (a
restore) are dropped.
"""
from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import cloudpickle

from runtime.api.connectors.source.api import (
    AddSplitEvent,
    NoMoreSplitsEvent,
    ReaderInfo,
    ReaderRegistrationEvent,
    RequestSplitEvent,
    SourceEventWrapper,
    SplitEnumerator,
)
from runtime.core.errors import CorruptStateError
from runtime.core.operators import OperatorCoordinator, OperatorCoordinatorContext

log = logging.getLogger(__name__)

_STATE_VERSION = 1


class SplitAssignmentTracker:
    """Which splits went to which reader since the last completed checkpoint (Flink's SplitAssignmentTracker)."""

    def __init__(self) -> None:
        self.by_checkpoint: dict[int, dict[int, list[Any]]] = {}  # taken before checkpoint n's snapshot
        self.uncheckpointed: dict[int, list[Any]] = {}

    def record(self, subtask: int, splits: list[Any]) -> None:
        self.uncheckpointed.setdefault(subtask, []).extend(splits)

    def on_checkpoint(self, checkpoint_id: int) -> None:
        """The coordinator's snapshot of `checkpoint_id`: what was handed out so far precedes it in the readers too."""
        self.by_checkpoint[checkpoint_id], self.uncheckpointed = self.uncheckpointed, {}

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        for cid in [c for c in self.by_checkpoint if c <= checkpoint_id]:
            del self.by_checkpoint[cid]

    def take_back(self, subtask: int, restored_checkpoint_id: int | None) -> list[Any]:
        """What `subtask` was handed after `restored_checkpoint_id` (None: ever): it restarts without them."""
        out: list[Any] = []
        for cid in sorted(self.by_checkpoint):
            if restored_checkpoint_id is None or cid > restored_checkpoint_id:
                out.extend(self.by_checkpoint[cid].pop(subtask, []))
        out.extend(self.uncheckpointed.pop(subtask, []))
        return out


class _EnumeratorContext:
    """SplitEnumeratorContext for one enumerator (a restore makes a new one; the old one goes quiet)."""

    def __init__(self, coordinator: SourceCoordinator) -> None:
        self._c = coordinator
        self.closed = False
        self._timers: list[Any] = []

    def current_parallelism(self) -> int:
        return self._c.context.current_parallelism()

    def registered_readers(self) -> Mapping[int, ReaderInfo]:
        return dict(self._c.readers)

    def assign_splits(self, assignment: Mapping[int, list[Any]]) -> None:
        for subtask, splits in assignment.items():
            if subtask not in self._c.readers:
                raise ValueError(f"source '{self._c.operator_name}': cannot assign splits to subtask {subtask}, no reader is registered there")
            if not splits:
                continue
            self._c.tracker.record(subtask, list(splits))
            self._c.history.setdefault(subtask, []).extend(splits)
            self._c.send_to_attempts(subtask, AddSplitEvent(list(splits)))

    def assign_split(self, split: Any, subtask: int) -> None:
        self.assign_splits({subtask: [split]})

    def signal_no_more_splits(self, subtask: int) -> None:
        if subtask in self._c.readers:
            self._c.no_more.add(subtask)
            self._c.send_to_attempts(subtask, NoMoreSplitsEvent())

    def send_event_to_source_reader(self, subtask: int, event: Any) -> None:
        self._c.send_to_attempts(subtask, SourceEventWrapper(event))

    def run_in_coordinator_thread(self, fn: Callable[[], None]) -> None:
        self._c.context.execute(lambda: None if self.closed else fn())

    def call_async(
        self,
        fn: Callable[[], Any],
        handler: Callable[[Any, BaseException | None], None],
        initial_delay_s: float = 0.0,
        period_s: float = 0.0,
    ) -> None:
        def submit() -> None:
            if self.closed:
                return
            future = self._c.worker().submit(fn)
            future.add_done_callback(lambda f: self._c.context.execute(lambda: done(f)))

        def done(future: Future[Any]) -> None:
            if self.closed:
                return
            error = future.exception()
            try:
                handler(None if error is not None else future.result(), error)
            except Exception as e:  # noqa: BLE001 - the enumerator gave up: the job fails with its cause
                self._c.context.fail_job(e)
                return
            if period_s > 0 and not self.closed:
                self._timers.append(self._c.context.call_later(period_s, submit))

        self._timers.append(self._c.context.call_later(max(0.0, initial_delay_s), submit))

    def close(self) -> None:
        self.closed = True
        for t in self._timers:
            t.cancel()
        self._timers.clear()


class SourceCoordinator(OperatorCoordinator):
    """Speculative attempts of a source subtask (Flink's FLIP-245) read the same splits: the
    enumerator sees one reader per subtask; every split assigned to it goes to all its running
    attempts, and an attempt that registers later gets what its subtask was given so far
    (splits, then no-more-splits) replayed, so whichever attempt wins emitted all of it."""

    supports_concurrent_execution_attempts = True

    def __init__(self, context: OperatorCoordinatorContext, source: Any) -> None:
        super().__init__(context)
        self.source = source
        self.readers: dict[int, ReaderInfo] = {}  # per subtask: its first running attempt (what the enumerator sees)
        self.attempts: dict[int, set[int]] = {}  # per subtask: its running attempts
        self.history: dict[int, list[Any]] = {}  # per subtask: the splits assigned since its reader registered
        self.no_more: set[int] = set()  # subtasks told there are no more splits
        self.tracker = SplitAssignmentTracker()
        self.enumerator: SplitEnumerator[Any, Any] | None = None
        self._enum_context: _EnumeratorContext | None = None
        self._worker: ThreadPoolExecutor | None = None

    def worker(self) -> ThreadPoolExecutor:
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix=f"source-coordinator-{self.job_id[:8]}")
        return self._worker

    def _install(self, state: Any = None, restored: bool = False) -> None:
        if self._enum_context is not None:
            self._enum_context.close()
        if self.enumerator is not None:
            self.enumerator.close()
        self._enum_context = _EnumeratorContext(self)
        ctx = self._enum_context
        self.enumerator = self.source.restore_enumerator(ctx, state) if restored else self.source.create_enumerator(ctx)
        self.enumerator.start()

    # --- OperatorCoordinator -------------------------------------------------------------------------
    def start(self) -> None:
        self._install()

    def close(self) -> None:
        if self._enum_context is not None:
            self._enum_context.close()
        if self.enumerator is not None:
            self.enumerator.close()
        if self._worker is not None:
            self._worker.shutdown(wait=False, cancel_futures=True)

    def handle_event_from_operator(self, subtask: int, attempt: int, event: Any) -> None:
        assert self.enumerator is not None
        if isinstance(event, ReaderRegistrationEvent):
            running = self.attempts.setdefault(subtask, set())
            running.add(attempt)
            if subtask in self.readers:  # a concurrent (speculative) attempt: what its subtask got so far
                if self.history.get(subtask):
                    self.context.send_event(subtask, attempt, AddSplitEvent(list(self.history[subtask])))
                if subtask in self.no_more:
                    self.context.send_event(subtask, attempt, NoMoreSplitsEvent())
                return
            self.readers[subtask] = ReaderInfo(subtask, attempt)
            self.enumerator.add_reader(subtask)
            return
        if attempt not in self.attempts.get(subtask, ()):
            log.debug("source '%s': event from subtask %d attempt %d, not a registered reader: dropped", self.operator_name, subtask, attempt)
            return
        if isinstance(event, RequestSplitEvent):
            self.enumerator.handle_split_request(subtask, event.hostname)
        elif isinstance(event, SourceEventWrapper):
            self.enumerator.handle_source_event(subtask, event.event)
        else:
            raise TypeError(f"source '{self.operator_name}': unknown event {type(event).__name__} from subtask {subtask}")

    def send_to_attempts(self, subtask: int, event: Any) -> None:
        for attempt in sorted(self.attempts.get(subtask, ())):
            self.context.send_event(subtask, attempt, event)

    def execution_attempt_failed(self, subtask: int, attempt: int) -> None:
        running = self.attempts.get(subtask)
        if running is None or attempt not in running:
            return
        running.discard(attempt)
        if running:  # another attempt of the subtask goes on with the same splits
            self.readers[subtask] = ReaderInfo(subtask, min(running))
        else:
            self._forget(subtask)

    def _forget(self, subtask: int) -> None:
        self.readers.pop(subtask, None)
        self.attempts.pop(subtask, None)
        self.history.pop(subtask, None)
        self.no_more.discard(subtask)

    def checkpoint_coordinator(self, checkpoint_id: int) -> bytes | None:
        assert self.enumerator is not None
        self.tracker.on_checkpoint(checkpoint_id)
        return cloudpickle.dumps({"version": _STATE_VERSION, "enumerator": self.enumerator.snapshot_state(checkpoint_id)})

    def notify_checkpoint_complete(self, checkpoint_id: int, committables: list[Any]) -> None:
        self.tracker.on_checkpoint_complete(checkpoint_id)
        if self.enumerator is not None:
            self.enumerator.notify_checkpoint_complete(checkpoint_id)

    def reset_coordinator(self, checkpoint_id: int | None, state: bytes | None) -> None:
        for subtask in list(self.readers):
            self._forget(subtask)
        self.tracker = SplitAssignmentTracker()
        if state is None:
            self._install()
            return
        try:
            data = pickle.loads(state)
            enumerator_state = data["enumerator"]
        except Exception as e:
            raise CorruptStateError(
                f"source '{self.operator_name}': the split enumerator state in checkpoint {checkpoint_id} cannot be read: {e}"
            ) from e
        self._install(enumerator_state, restored=True)

    def subtask_reset(self, subtask: int, checkpoint_id: int | None) -> None:
        self._forget(subtask)
        splits = self.tracker.take_back(subtask, checkpoint_id)
        if splits and self.enumerator is not None:
            self.enumerator.add_splits_back(splits, subtask)


class SourceCoordinatorProvider:
    """Creates the SourceCoordinator on the JobMaster; pickled into the JobGraph with its source."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def create(self, context: OperatorCoordinatorContext) -> SourceCoordinator:
        return SourceCoordinator(context, self.source)
