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
entries. Kinds are the state kinds of `runtime.api.datastream.state.StateKind` plus operator-internal
ones (e.g. "timer", "pane"). This is the layout of the checkpoint Delta table, so Spark SQL can read it.
"""
from __future__ import annotations

import contextlib
import contextvars
import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Union

# state name -> (kind, [(key, namespace, value), ...])
KeyGroupState = dict[str, tuple[str, list[tuple[Any, Any, Any]]]]
KeyedSnapshot = dict[int, KeyGroupState]


class CheckpointingMode(str, enum.Enum):
    """PyFlink's CheckpointingMode."""

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


@dataclass(frozen=True)
class CheckpointBarrier:
    """In-band marker: everything before it belongs to checkpoint `checkpoint_id` (Flink: CheckpointBarrier)."""

    checkpoint_id: int
    timestamp: int
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE


@dataclass
class OperatorSnapshot:
    """What one operator subtask contributes to a checkpoint."""

    # key group -> state; or a zero-argument supplier of that, run on the snapshot thread
    keyed: Union[KeyedSnapshot, Callable[[], KeyedSnapshot]] = field(default_factory=dict)
    # operator (non-keyed) list state: redistributed round-robin over the subtasks on restore
    operator_lists: dict[str, list[Any]] = field(default_factory=dict)
    # union list state: every subtask gets every item on restore
    union_lists: dict[str, list[Any]] = field(default_factory=dict)
    # handed to the operator's coordinator when the checkpoint completes (e.g. Delta files to commit)
    committables: list[Any] | None = None

    def materialize_keyed(self) -> KeyedSnapshot:
        k = self.keyed
        return k() if callable(k) else k

    @property
    def is_empty(self) -> bool:
        return not self.keyed and not self.operator_lists and not self.union_lists and not self.committables


@dataclass
class StateInitializationContext:
    """What an operator gets back on restore (Flink: StateInitializationContext)."""

    restored_checkpoint_id: int | None = None
    keyed: KeyedSnapshot = field(default_factory=dict)
    operator_lists: dict[str, list[Any]] = field(default_factory=dict)
    union_lists: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def is_restored(self) -> bool:
        return self.restored_checkpoint_id is not None


_copy_on_write = contextvars.ContextVar("millrace_snapshot_copy_on_write", default=False)


@contextlib.contextmanager
def copy_on_write_snapshot() -> Iterator[None]:
    """The task forks right after `snapshot_state`: the child's image is the snapshot, so state
    backends need not pin (copy) anything in the synchronous part; suppliers may read live state."""
    token = _copy_on_write.set(True)
    try:
        yield
    finally:
        _copy_on_write.reset(token)


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


def operator_state_id(uid: str | None, node_id: int) -> str:
    """The id under which an operator's state is stored: its uid, else one derived from its node.

    Restarts within one job always find their state (node ids are fixed in the JobGraph);
    savepoints matched across jobs need uids.
    """
    return uid if uid else f"node-{node_id}"


# configuration keys (Flink's names)
CHECKPOINT_INTERVAL_KEY = "execution.checkpointing.interval"
CHECKPOINT_MODE_KEY = "execution.checkpointing.mode"
CHECKPOINT_TIMEOUT_KEY = "execution.checkpointing.timeout"
CHECKPOINT_MIN_PAUSE_KEY = "execution.checkpointing.min-pause"
CHECKPOINT_TOLERABLE_FAILURES_KEY = "execution.checkpointing.tolerable-failed-checkpoints"
CHECKPOINT_MAX_CONCURRENT_KEY = "execution.checkpointing.max-concurrent-checkpoints"
CHECKPOINTS_DIR_KEY = "state.checkpoints.dir"
CHECKPOINTS_RETAINED_KEY = "state.checkpoints.num-retained"
STATE_BACKEND_KEY = "state.backend.type"
