"""The source interfaces of FLIP-27 (Flink's org.apache.flink.api.connector.source).

A source is split into two halves that never see an operator:
- a `SplitEnumerator` runs on the JobMaster (inside the source's operator coordinator): it
  discovers splits, hands them to readers when they ask, takes back the splits of a reader that
  failed, and snapshots what it has not handed out yet in every checkpoint and savepoint;
- a `SourceReader` runs in each source subtask: it reads the splits it was given, polled for one
  batch at a time by the runtime, and snapshots the splits it has not finished (each with its
  position) in every checkpoint.

Splits are small picklable values with a `split_id`; enumerator states are picklable values.
The runtime (`reader_operator.py`, `coordinator.py`) carries the events between the two halves,
per-split watermarks, checkpoint ordering and failover; `testing.py` runs either half alone.
"""
from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from runtime.core.operators import InputStatus
from runtime.core.records import RecordBatch

SPLITS_STATE = "splits"  # the operator list state that holds a source subtask's splits

SplitT = TypeVar("SplitT")
EnumChkT = TypeVar("EnumChkT")


class Boundedness(enum.Enum):
    BOUNDED = "BOUNDED"
    CONTINUOUS_UNBOUNDED = "CONTINUOUS_UNBOUNDED"


class SourceSplit(Protocol):
    """A piece of work for one reader (a file, a partition); `split_id` is unique within the source."""

    @property
    def split_id(self) -> str: ...


# --- events between the two halves (the runtime's; connectors send their own as source events) ---


@dataclass(frozen=True)
class ReaderRegistrationEvent:
    """Reader -> enumerator: this subtask attempt runs and may be given splits."""

    subtask: int
    attempt: int


@dataclass(frozen=True)
class RequestSplitEvent:
    """Reader -> enumerator: give me work (Flink: SourceReaderContext.sendSplitRequest)."""

    hostname: str | None = None


@dataclass(frozen=True)
class AddSplitEvent:
    """Enumerator -> reader: these splits are yours."""

    splits: list[Any]


@dataclass(frozen=True)
class NoMoreSplitsEvent:
    """Enumerator -> reader: nothing more will come (a bounded source ends when its splits are done)."""


@dataclass(frozen=True)
class SourceEventWrapper:
    """A connector's own event, either way."""

    event: Any


# --- the enumerator half --------------------------------------------------------------------------


@dataclass(frozen=True)
class ReaderInfo:
    subtask: int
    attempt: int


class SplitEnumeratorContext(Protocol, Generic[SplitT]):
    """What an enumerator may ask of the runtime (Flink: SplitEnumeratorContext). Every method is
    called on the coordinator's thread, and every callback runs there."""

    def current_parallelism(self) -> int: ...

    def registered_readers(self) -> Mapping[int, ReaderInfo]: ...

    def assign_splits(self, assignment: Mapping[int, list[SplitT]]) -> None:
        """Hand splits to registered readers (subtask -> splits)."""
        ...

    def assign_split(self, split: SplitT, subtask: int) -> None: ...

    def signal_no_more_splits(self, subtask: int) -> None: ...

    def send_event_to_source_reader(self, subtask: int, event: Any) -> None: ...

    def call_async(
        self,
        fn: Callable[[], Any],
        handler: Callable[[Any, BaseException | None], None],
        initial_delay_s: float = 0.0,
        period_s: float = 0.0,
    ) -> None:
        """Run `fn` off the coordinator's thread (I/O: listing files, reading a log), then
        `handler(result, error)` on it; every `period_s` if > 0. An exception in the handler fails the job."""
        ...

    def run_in_coordinator_thread(self, fn: Callable[[], None]) -> None: ...


class SplitEnumerator(abc.ABC, Generic[SplitT, EnumChkT]):
    def start(self) -> None:
        """Called once, before any reader registers (discovery starts here)."""

    @abc.abstractmethod
    def handle_split_request(self, subtask: int, requester_hostname: str | None) -> None:
        """A reader asked for work: assign it a split, park the request, or signal no more splits."""

    @abc.abstractmethod
    def add_splits_back(self, splits: list[SplitT], subtask: int) -> None:
        """Splits handed to `subtask` after its last completed checkpoint, which it lost when it failed:
        they are unread as far as the job's state knows, so they go out again."""

    @abc.abstractmethod
    def add_reader(self, subtask: int) -> None:
        """A reader registered (a new subtask attempt)."""

    @abc.abstractmethod
    def snapshot_state(self, checkpoint_id: int) -> EnumChkT:
        """What the enumerator has not handed out yet, and where its discovery is (picklable)."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def handle_source_event(self, subtask: int, event: Any) -> None:
        pass

    def close(self) -> None:
        pass


# --- the reader half ------------------------------------------------------------------------------


class SourceReaderContext(Protocol):
    """What a reader may ask of the runtime (Flink: SourceReaderContext)."""

    @property
    def index_of_subtask(self) -> int: ...

    @property
    def current_parallelism(self) -> int: ...

    @property
    def attempt_number(self) -> int: ...

    @property
    def max_parallelism(self) -> int:
        """The operator's max parallelism: no restore ever has more readers (Millrace's addition)."""
        ...

    @property
    def config(self) -> Mapping[str, str]: ...

    def send_split_request(self) -> None: ...

    def send_source_event_to_coordinator(self, event: Any) -> None: ...


class ReaderOutput(Protocol):
    """Where a reader puts its records (Flink: ReaderOutput / SourceOutput per split)."""

    def collect(self, batch: RecordBatch, split_id: str | None = None) -> None:
        """Records of split `split_id` (its own watermark); None: of no split (the reader's output)."""
        ...

    def release_split(self, split_id: str) -> None:
        """Split `split_id` is done: its watermark no longer holds the reader's back."""
        ...


class SourceReader(abc.ABC, Generic[SplitT]):
    # True: each split's records carry their own watermark (Flink's split-local watermarks); a split
    # added but not yet read holds the reader's watermark back. False: the reader emits its records
    # in event-time order itself (collect with split_id None) and one watermark follows its output.
    split_local_watermarks: bool = True

    def start(self) -> None:
        """Called once after the restored splits (if any) were added; ask for work here."""

    @abc.abstractmethod
    def poll_next(self, output: ReaderOutput) -> InputStatus:
        """Emit at most one batch; NOTHING_AVAILABLE when waiting for splits or data,
        END_OF_INPUT when no more splits will come and every split is done."""

    @abc.abstractmethod
    def snapshot_state(self, checkpoint_id: int) -> list[SplitT]:
        """The splits not finished, each with its position (a cheap copy)."""

    @abc.abstractmethod
    def add_splits(self, splits: list[SplitT]) -> None: ...

    def notify_no_more_splits(self) -> None:
        pass

    def handle_source_events(self, event: Any) -> None:
        pass

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        pass

    def close(self) -> None:
        pass


class SourceReaderBase(SourceReader[SplitT]):
    """A reader of one split at a time, in the order received (Flink: SingleThreadMultiplexSourceReaderBase,
    without the fetcher thread): it asks for a split whenever it has none, releases each split when
    done, and ends once told there are no more. Subclasses read: `read_next(split)` returns a batch
    and the split's new position, or None when the split is finished."""

    def __init__(self, context: SourceReaderContext) -> None:
        self.context = context
        self.splits: list[SplitT] = []
        self.no_more_splits = False
        self._asked = False

    def start(self) -> None:
        if not self.splits:
            self._ask()

    def _ask(self) -> None:
        if not self._asked and not self.no_more_splits:
            self._asked = True
            self.context.send_split_request()

    def add_splits(self, splits: list[SplitT]) -> None:
        self.splits.extend(splits)
        self._asked = False

    def notify_no_more_splits(self) -> None:
        self.no_more_splits = True

    def snapshot_state(self, checkpoint_id: int) -> list[SplitT]:
        return list(self.splits)

    def poll_next(self, output: ReaderOutput) -> InputStatus:
        while self.splits:
            split = self.splits[0]
            got = self.read_next(split)
            if got is None:
                self.finish_split(split)
                self.splits.pop(0)
                output.release_split(split_id_of(split))
                if not self.splits:
                    self._ask()
                continue
            batch, advanced = got
            self.splits[0] = advanced
            if len(batch):
                output.collect(batch, split_id_of(split))
            return InputStatus.MORE_AVAILABLE
        if self.no_more_splits:
            return InputStatus.END_OF_INPUT
        self._ask()
        return InputStatus.NOTHING_AVAILABLE

    @abc.abstractmethod
    def read_next(self, split: SplitT) -> tuple[RecordBatch, SplitT] | None:
        """The next batch of `split` and the split advanced past it; None: the split is finished."""

    def finish_split(self, split: SplitT) -> None:
        """The split is finished (close what reading it opened)."""


def split_id_of(split: Any) -> str:
    sid = getattr(split, "split_id", None)
    if not isinstance(sid, str):
        raise TypeError(f"a source split needs a str `split_id`; {type(split).__name__} has {sid!r}")
    return sid


__all__ = [
    "AddSplitEvent", "Boundedness", "NoMoreSplitsEvent", "ReaderInfo", "ReaderOutput", "ReaderRegistrationEvent",
    "RequestSplitEvent", "SPLITS_STATE", "SourceEventWrapper", "SourceReader", "SourceReaderBase", "SourceReaderContext",
    "SourceSplit", "SplitEnumerator", "SplitEnumeratorContext", "split_id_of",
]
