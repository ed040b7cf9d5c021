"""Checkpoint types shared by the API, the TaskManager, the JobManager and storage.

The operator state contract (Flink: StreamOperatorStateHandler + CheckpointedFunction):
- `initialize_state(StateInitializationContext)`: after setup, before open; restored state (only
  the key groups this subtask owns; operator list state redistributed round-robin; union list
  state in full) or nothing on a fresh start.
- `snapshot_state(checkpoint_id) -> OperatorSnapshot | None`: the synchronous part, on the task
  thread, must be cheap (copies, not serialisation); `OperatorSnapshot.keyed` may be a supplier
  evaluated later on the snapshot thread (the asynchronous part).
- `notify_checkpoint_complete(checkpoint_id)` / `notify_checkpoint_aborted(checkpoint_id)`.

Keyed state travels as rows: per key group, per state name, a kind and (key, namespace, value)
entries. Kinds are the state kinds of `runtime.core.state.StateKind` plus operator-internal
ones (e.g. "timer", "pane"). This is the layout of the checkpoint Delta table, so Spark SQL can read it.
"""
from __future__ import annotations

import contextlib
import contextvars
import operator
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from runtime.core.execution_modes import CheckpointingMode
from runtime.core.options import checkpointing as _checkpointing
from runtime.core.options import state as _state_options

_K0, _K1, _K2 = operator.itemgetter(0), operator.itemgetter(1), operator.itemgetter(2)


class StateEntries(Sequence[tuple[Any, Any, Any]]):
    """The (key, namespace, value) entries of one state in one key group, as two columns: the
    (key, namespace) pairs and the values.

    That is how the heap backend holds state ({(key, namespace): value}) and how a restore loads
    it, so a snapshot hands a dict's views over without building (and a state file writer then
    taking apart) one tuple per entry, which was most of a million-key snapshot. Reads as a
    sequence of (key, namespace, value) tuples for everyone else.
    """

    __slots__ = ("pairs", "values")

    def __init__(self, pairs: Collection[tuple[Any, Any]], values: Collection[Any]) -> None:
        if len(pairs) != len(values):
            raise ValueError(f"state entry columns differ in length: {len(pairs)} pairs, {len(values)} values")
        self.pairs, self.values = pairs, values

    @classmethod
    def of_map(cls, m: Mapping[tuple[Any, Any], Any]) -> StateEntries:
        """A view of a {(key, namespace): value} map, in its iteration order (the map must not change)."""
        return cls(m.keys(), m.values())

    @classmethod
    def of(cls, entries: Iterable[tuple[Any, Any, Any]]) -> StateEntries:
        if isinstance(entries, StateEntries):
            return entries
        rows = entries if isinstance(entries, list) else list(entries)
        return cls(list(zip(map(_K0, rows), map(_K1, rows))), list(map(_K2, rows)))

    def __len__(self) -> int:
        return len(self.values)

    @overload
    def __getitem__(self, i: int) -> tuple[Any, Any, Any]: ...
    @overload
    def __getitem__(self, i: slice) -> list[tuple[Any, Any, Any]]: ...
    def __getitem__(self, i: int | slice) -> Any:
        return list(self)[i]  # rare (tests, debugging): the columns may be dict views

    def __iter__(self) -> Iterator[tuple[Any, Any, Any]]:
        return ((k, ns, v) for (k, ns), v in zip(self.pairs, self.values))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (StateEntries, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # unhashable, like the lists it equals; mypy types object.__hash__ a method

    def extend(self, other: Iterable[tuple[Any, Any, Any]]) -> None:
        """Append entries (a restore that reads one state from two files); the columns become lists."""
        o = StateEntries.of(other)
        self.pairs = [*self.pairs, *o.pairs]
        self.values = [*self.values, *o.values]

    def __reduce__(self) -> tuple[Any, ...]:  # copy / pickle as lists: dict views cannot be
        return (StateEntries, (list(self.pairs), list(self.values)))

    def __repr__(self) -> str:
        return f"StateEntries({list(self)!r})"


# state name -> (kind, entries): a list of (key, namespace, value) tuples or StateEntries columns
KeyGroupState = dict[str, tuple[str, Sequence[tuple[Any, Any, Any]]]]
KeyedSnapshot = dict[int, KeyGroupState]


@dataclass(frozen=True)
class CheckpointBarrier:
    """In-band marker: everything before it belongs to checkpoint `checkpoint_id` (Flink: CheckpointBarrier)."""

    checkpoint_id: int
    timestamp: int
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    # a savepoint's Delta table: every task writes its state files there (Flink: the target
    # location in CheckpointOptions); None = the job's checkpoint table
    target_location: str | None = None
    # a stop-with-savepoint's barrier (Flink: a synchronous savepoint): a task that took its
    # snapshot runs no processing-time timer and emits nothing more, unless the savepoint fails
    synchronous: bool = False

    @property
    def is_savepoint(self) -> bool:
        return self.target_location is not None


@dataclass
class OperatorSnapshot:
    """What one operator subtask contributes to a checkpoint."""

    # key group -> state; or a zero-argument supplier of that, run on the snapshot thread
    keyed: KeyedSnapshot | Callable[[], KeyedSnapshot] = field(default_factory=dict)
    # operator (non-keyed) list state: redistributed round-robin over the subtasks on restore
    operator_lists: dict[str, list[Any]] = field(default_factory=dict)
    # union list state: every subtask gets every item on restore
    union_lists: dict[str, list[Any]] = field(default_factory=dict)
    # handed to the operator's coordinator when the checkpoint completes (e.g. Delta files to commit)
    committables: list[Any] | None = None
    # keyed state in a backend's native format (RocksDB's checkpoint files), or a supplier of it;
    # checkpoints only: savepoints are canonical (keyed above)
    native: NativeStateBundle | Callable[[], NativeStateBundle] | None = None
    # earlier checkpoints whose files of this task the state builds on (incremental checkpoints)
    shared_checkpoints: list[int] = field(default_factory=list)
    # what the keyed state's types are (Flink: StateMetaInfoSnapshot + the key serializer):
    # {"key": {"declared": ..., "observed": [...]}, "states": {name: {"kind": ..., "type": ...}}}
    # (runtime.state.type_descriptions); or a supplier given the materialized keyed state, whose
    # keys it looks at. None: nothing recorded (operators without a keyed state backend)
    state_meta: dict[str, Any] | Callable[[KeyedSnapshot], dict[str, Any]] | None = None

    def materialize_keyed(self) -> KeyedSnapshot:
        k = self.keyed
        return k() if callable(k) else k

    def materialize_state_meta(self, keyed: KeyedSnapshot) -> dict[str, Any] | None:
        m = self.state_meta
        return m(keyed) if callable(m) else m

    def materialize_native(self) -> NativeStateBundle | None:
        n = self.native
        return n() if callable(n) else n

    @property
    def is_empty(self) -> bool:
        return not self.keyed and not self.operator_lists and not self.union_lists and not self.committables and self.native is None


NATIVE_CHANGELOG_FILE = "__changelog__"  # an incremental checkpoint's log among a NativeStateBundle's files


@dataclass
class NativeStateBundle:
    """One subtask's keyed state as a backend's own files (Flink: a native/incremental RocksDB
    checkpoint): `catalog` (JSON-able: format, key-group range, state tables) and the files."""

    catalog: dict[str, Any]
    files: dict[str, bytes]
    # incremental checkpoints: the checkpoint whose state file holds these rows (None: a full one)
    checkpoint_id: int | None = None
    # on restore: the logs to apply over `files` (the base), oldest first (runtime.state.changelog)
    changelogs: list[bytes] = field(default_factory=list)


@dataclass
class StateInitializationContext:
    """What an operator gets back on restore (Flink: StateInitializationContext)."""

    restored_checkpoint_id: int | None = None
    keyed: KeyedSnapshot = field(default_factory=dict)
    operator_lists: dict[str, list[Any]] = field(default_factory=dict)
    union_lists: dict[str, list[Any]] = field(default_factory=dict)
    native: list[NativeStateBundle] = field(default_factory=list)  # read by the keyed backend's format
    # the recorded types (OperatorSnapshot.state_meta, merged over the old subtasks); None when the
    # snapshot recorded none (written before types were recorded): nothing is then checked
    state_meta: dict[str, Any] | None = None

    @property
    def is_restored(self) -> bool:
        return self.restored_checkpoint_id is not None


@contextlib.contextmanager
def _flag_set(flag: contextvars.ContextVar[bool]) -> Iterator[None]:
    token = flag.set(True)
    try:
        yield
    finally:
        flag.reset(token)


_canonical = contextvars.ContextVar("millrace_canonical_snapshot", default=False)
_copy_on_write = contextvars.ContextVar("millrace_snapshot_copy_on_write", default=False)


def canonical_snapshot() -> contextlib.AbstractContextManager[None]:
    """A savepoint is being taken: every backend writes the canonical format (no native files)."""
    return _flag_set(_canonical)


def snapshot_is_canonical() -> bool:
    return _canonical.get()


def copy_on_write_snapshot() -> contextlib.AbstractContextManager[None]:
    """The task forks right after `snapshot_state`: the child's image is the snapshot, so state
    backends need not pin (copy) anything in the synchronous part; suppliers may read live state."""
    return _flag_set(_copy_on_write)


def snapshot_is_copy_on_write() -> bool:
    return _copy_on_write.get()


_in_forked_writer = False


def mark_forked_snapshot_writer() -> None:
    """Called first thing in a forked snapshot writer: libraries whose background threads did not
    survive the fork (RocksDB) must not wait for them there (open read-only, never close)."""
    global _in_forked_writer
    _in_forked_writer = True


def in_forked_snapshot_writer() -> bool:
    return _in_forked_writer


# the keys of the options this module's users read, under their old names (the options are
# declared in runtime.core.options.checkpointing and .state)
CHECKPOINT_INTERVAL_KEY = _checkpointing.CHECKPOINTING_INTERVAL.key
CHECKPOINT_MODE_KEY = _checkpointing.CHECKPOINTING_MODE.key
CHECKPOINT_TIMEOUT_KEY = _checkpointing.CHECKPOINTING_TIMEOUT.key
CHECKPOINT_MIN_PAUSE_KEY = _checkpointing.MIN_PAUSE_BETWEEN_CHECKPOINTS.key
CHECKPOINT_TOLERABLE_FAILURES_KEY = _checkpointing.TOLERABLE_FAILURE_NUMBER.key
CHECKPOINT_MAX_CONCURRENT_KEY = _checkpointing.MAX_CONCURRENT_CHECKPOINTS.key
CHECKPOINTS_AFTER_TASKS_FINISH_KEY = _checkpointing.CHECKPOINTS_AFTER_TASKS_FINISH.key
CHECKPOINTS_AFTER_TASKS_FINISH_DEPRECATED_KEYS = _checkpointing.CHECKPOINTS_AFTER_TASKS_FINISH.deprecated_keys
CHECKPOINTS_DIR_KEY = _checkpointing.CHECKPOINTS_DIRECTORY.key
CHECKPOINTS_RETAINED_KEY = _checkpointing.MAX_RETAINED_CHECKPOINTS.key
SAVEPOINTS_DIR_KEY = _checkpointing.SAVEPOINT_DIRECTORY.key
SAVEPOINT_PATH_KEY = _checkpointing.SAVEPOINT_PATH.key
SAVEPOINT_IGNORE_UNCLAIMED_KEY = _checkpointing.SAVEPOINT_IGNORE_UNCLAIMED_STATE.key
END_OF_INPUT_SAVEPOINT_KEY = _checkpointing.END_OF_INPUT_SAVEPOINT.key
STATE_BACKEND_KEY = _state_options.STATE_BACKEND.key


def end_of_input_savepoint(config: Mapping[str, Any]) -> bool:
    """execution.end-of-input.savepoint (default false); ConfigurationError for a value that is not a boolean."""
    return _checkpointing.END_OF_INPUT_SAVEPOINT.get(config)
