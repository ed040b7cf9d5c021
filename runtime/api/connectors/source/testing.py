"""Test harnesses for FLIP-27 connector authors (Flink's MockSplitEnumeratorContext,
TestingReaderContext, TestingReaderOutput and SourceReaderTestBase; Bytewax's testing.py).

A connector's enumerator and reader are tested without a job, an operator or a JobMaster:
- `TestingSplitEnumeratorContext` records assignments and signals, and runs `call_async` work
  when the test says so (`run_callables`), on the test's thread;
- `TestingReaderContext` counts split requests; `TestingReaderOutput` keeps what a reader emits;
- `SourceHarness` wires one enumerator to N readers in-process (requests go to the enumerator,
  assignments to the readers) and takes and restores checkpoints of both halves, at any new
  parallelism, the way the runtime does: the enumerator's state as is, the readers' splits dealt out.
"""
from __future__ import annotations

import pickle
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.api.connectors.source.api import ReaderInfo, SourceReader, SplitEnumerator, split_id_of
from runtime.core.operators import InputStatus
from runtime.core.records import RecordBatch


@dataclass
class _Callable:
    fn: Callable[[], Any]
    handler: Callable[[Any, BaseException | None], None]
    period_s: float


class TestingSplitEnumeratorContext:
    """SplitEnumeratorContext for tests: every assignment lands in `assignments` (subtask -> splits)."""

    __test__ = False

    def __init__(self, parallelism: int) -> None:
        self.parallelism = parallelism
        self.readers: dict[int, ReaderInfo] = {}
        self.assignments: dict[int, list[Any]] = {}
        self.no_more_splits: set[int] = set()
        self.events: list[tuple[int, Any]] = []
        self.callables: list[_Callable] = []

    def register_reader(self, subtask: int, attempt: int = 0) -> None:
        self.readers[subtask] = ReaderInfo(subtask, attempt)

    def unregister_reader(self, subtask: int) -> None:
        self.readers.pop(subtask, None)

    # --- SplitEnumeratorContext ------------------------------------------------------------------
    def current_parallelism(self) -> int:
        return self.parallelism

    def registered_readers(self) -> Mapping[int, ReaderInfo]:
        return dict(self.readers)

    def assign_splits(self, assignment: Mapping[int, list[Any]]) -> None:
        for subtask, splits in assignment.items():
            if subtask not in self.readers:
                raise ValueError(f"cannot assign splits to subtask {subtask}: no reader is registered there")
            self.assignments.setdefault(subtask, []).extend(splits)

    def assign_split(self, split: Any, subtask: int) -> None:
        self.assign_splits({subtask: [split]})

    def signal_no_more_splits(self, subtask: int) -> None:
        self.no_more_splits.add(subtask)

    def send_event_to_source_reader(self, subtask: int, event: Any) -> None:
        self.events.append((subtask, event))

    def call_async(
        self, fn: Callable[[], Any], handler: Callable[[Any, BaseException | None], None], initial_delay_s: float = 0.0, period_s: float = 0.0
    ) -> None:
        self.callables.append(_Callable(fn, handler, period_s))

    def run_in_coordinator_thread(self, fn: Callable[[], None]) -> None:
        fn()

    # --- the test drives time ----------------------------------------------------------------------
    def run_callables(self) -> int:
        """Run every pending `call_async` once (its handler right after); periodic ones stay. Returns how many ran."""
        pending, self.callables = self.callables, []
        for c in pending:
            try:
                result, error = c.fn(), None
            except Exception as e:  # noqa: BLE001 - handed to the handler, as the runtime does
                result, error = None, e
            c.handler(result, error)
            if c.period_s > 0:
                self.callables.append(c)
        return len(pending)

    def take_assignments(self, subtask: int) -> list[Any]:
        return self.assignments.pop(subtask, [])


class TestingReaderContext:
    """SourceReaderContext for tests."""

    __test__ = False

    def __init__(
        self, subtask: int = 0, parallelism: int = 1, attempt: int = 0, config: Mapping[str, str] | None = None, max_parallelism: int = 128
    ) -> None:
        self.index_of_subtask = subtask
        self.current_parallelism = parallelism
        self.attempt_number = attempt
        self.max_parallelism = max_parallelism
        self.config: Mapping[str, str] = dict(config or {})
        self.split_requests = 0
        self.source_events: list[Any] = []

    def send_split_request(self) -> None:
        self.split_requests += 1

    def send_source_event_to_coordinator(self, event: Any) -> None:
        self.source_events.append(event)


@dataclass
class TestingReaderOutput:
    """ReaderOutput for tests: the batches (with the split each came from) and the released splits."""

    __test__ = False
    batches: list[tuple[str | None, RecordBatch]] = field(default_factory=list)
    released: list[str] = field(default_factory=list)

    def collect(self, batch: RecordBatch, split_id: str | None = None) -> None:
        self.batches.append((split_id, batch))

    def release_split(self, split_id: str) -> None:
        self.released.append(split_id)

    def rows(self) -> list[Any]:
        return [r for _, b in self.batches for r in b.rows()]


def poll_until(reader: SourceReader[Any], output: TestingReaderOutput, stop: Callable[[InputStatus], bool], max_polls: int = 100_000) -> InputStatus:
    """Poll `reader` until `stop(status)`; fails after `max_polls` (a reader that never gets there)."""
    for _ in range(max_polls):
        status = reader.poll_next(output)
        if stop(status):
            return status
    raise AssertionError(f"{type(reader).__name__} did not get there in {max_polls} polls")


@dataclass
class SourceCheckpoint:
    """Both halves' state, as the runtime stores them: the enumerator's (pickled) and each reader's splits."""

    enumerator: bytes
    reader_splits: dict[int, list[Any]]


class SourceHarness:
    """One enumerator and `parallelism` readers of `source`, in-process.

    `step()` moves each reader once (one poll) and then routes: its split requests to the
    enumerator, the enumerator's assignments and no-more-splits signals to the readers. `checkpoint()`
    takes both halves' state (the enumerator first, as the runtime does); `restore()` makes a new
    harness from one, at any parallelism. `fail(subtask)` loses a reader and gives the enumerator
    back what that reader got since the last checkpoint, as the runtime's assignment tracker does.
    """

    __test__ = False

    def __init__(self, source: Any, parallelism: int, checkpoint: SourceCheckpoint | None = None) -> None:
        self.source = source
        self.parallelism = parallelism
        self.context = TestingSplitEnumeratorContext(parallelism)
        self.enumerator: SplitEnumerator[Any, Any] = (
            source.restore_enumerator(self.context, pickle.loads(checkpoint.enumerator)) if checkpoint else source.create_enumerator(self.context)
        )
        self.enumerator.start()
        self.outputs = [TestingReaderOutput() for _ in range(parallelism)]
        self.readers: dict[int, SourceReader[Any]] = {}
        self.reader_contexts: dict[int, TestingReaderContext] = {}
        self.status: dict[int, InputStatus] = {}
        self._since_checkpoint: dict[int, list[Any]] = {}
        restored = _deal(checkpoint.reader_splits if checkpoint else {}, parallelism)
        for i in range(parallelism):
            self._start_reader(i, restored[i])

    def _start_reader(self, subtask: int, splits: list[Any], attempt: int = 0) -> None:
        ctx = TestingReaderContext(subtask, self.parallelism, attempt)
        reader = self.source.create_reader(ctx)
        if splits:
            reader.add_splits(list(splits))
        self.context.register_reader(subtask, attempt)
        self.enumerator.add_reader(subtask)
        reader.start()
        self.readers[subtask], self.reader_contexts[subtask] = reader, ctx
        self.status.pop(subtask, None)
        self._route(subtask)

    def _route(self, subtask: int) -> None:
        ctx = self.reader_contexts[subtask]
        while ctx.split_requests:
            ctx.split_requests -= 1
            self.enumerator.handle_split_request(subtask, None)
        for i, reader in self.readers.items():
            got = self.context.take_assignments(i)
            if got:
                self._since_checkpoint.setdefault(i, []).extend(got)
                reader.add_splits(got)
            if i in self.context.no_more_splits:
                self.context.no_more_splits.discard(i)
                reader.notify_no_more_splits()

    def step(self) -> bool:
        """Poll every reader that has not ended once; False when all ended."""
        live = False
        for i, reader in list(self.readers.items()):
            if self.status.get(i) is InputStatus.END_OF_INPUT:
                continue
            self.status[i] = reader.poll_next(self.outputs[i])
            self._route(i)
            live = live or self.status[i] is not InputStatus.END_OF_INPUT
        return live

    def discover(self) -> None:
        """Run the enumerator's pending `call_async` work (e.g. one split discovery) and route its assignments."""
        self.context.run_callables()
        for i in self.readers:
            self._route(i)

    def run_until_idle(self, max_steps: int = 100_000) -> None:
        """Step until every reader ended or waits (NOTHING_AVAILABLE twice in a row everywhere)."""
        quiet = 0
        for _ in range(max_steps):
            if not self.step():
                return
            quiet = quiet + 1 if all(s is not InputStatus.MORE_AVAILABLE for s in self.status.values()) else 0
            if quiet >= 2:
                return
        raise AssertionError(f"the source did not settle in {max_steps} steps")

    def checkpoint(self, checkpoint_id: int = 1) -> SourceCheckpoint:
        enumerator = pickle.dumps(self.enumerator.snapshot_state(checkpoint_id))
        splits = {i: list(r.snapshot_state(checkpoint_id)) for i, r in self.readers.items()}
        self._since_checkpoint = {}
        return SourceCheckpoint(enumerator, splits)

    def fail(self, subtask: int, restored_splits: list[Any]) -> None:
        """Reader `subtask` fails and restarts with `restored_splits` (its splits at the last checkpoint)."""
        self.readers.pop(subtask).close()
        self.context.unregister_reader(subtask)
        back = self._since_checkpoint.pop(subtask, [])
        if back:
            self.enumerator.add_splits_back(back, subtask)
        self.outputs[subtask] = TestingReaderOutput()
        self._start_reader(subtask, restored_splits, attempt=self.reader_contexts[subtask].attempt_number + 1)

    def rows(self) -> list[Any]:
        return [r for o in self.outputs for r in o.rows()]

    def split_ids_emitted(self) -> list[str]:
        return [sid for o in self.outputs for sid, _ in o.batches if sid is not None]


def _deal(reader_splits: Mapping[int, list[Any]], parallelism: int) -> list[list[Any]]:
    """The old readers' splits dealt round-robin to the new ones (the runtime's operator list state)."""
    out: list[list[Any]] = [[] for _ in range(parallelism)]
    flat = [s for i in sorted(reader_splits) for s in reader_splits[i]]
    for k, s in enumerate(flat):
        out[k % parallelism].append(s)
    return out


__all__ = [
    "SourceCheckpoint", "SourceHarness", "TestingReaderContext", "TestingReaderOutput", "TestingSplitEnumeratorContext",
    "poll_until", "split_id_of",
]
