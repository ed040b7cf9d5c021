"""A split enumerator over a fixed set of splits (Flink's IteratorSourceEnumerator), for sources
whose whole work is known when the job starts: the generators and from_collection.

Each reader's request gets one pending split, or no-more-splits when none is left for it. On a
fresh start the splits may name the subtask they belong to (`owner`): such a split goes to that
subtask only (back to it, too, when it failed), so a fresh run deals the same work to the same
subtask whatever order the readers register and finish in (a generator's subtasks walk through
the index space together, every subtask emits, and a rerun emits the same records per subtask).
Splits without an owner (those left after a restore, at any parallelism) go to whoever asks.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from runtime.api.connectors.source.api import SplitEnumerator, SplitEnumeratorContext

SplitT = TypeVar("SplitT")


class StaticSplitEnumerator(SplitEnumerator[SplitT, list[SplitT]], Generic[SplitT]):
    def __init__(self, context: SplitEnumeratorContext[SplitT], pending: list[SplitT], owner: Callable[[SplitT], int | None] | None = None) -> None:
        self.context = context
        self.pending = list(pending)
        self.owner = owner

    def handle_split_request(self, subtask: int, requester_hostname: str | None) -> None:
        if subtask not in self.context.registered_readers():
            return  # a reader that failed since it asked: its next attempt asks again
        owner = self.owner
        pick = next((k for k, s in enumerate(self.pending) if owner is None or owner(s) in (None, subtask)), None)
        if pick is None:
            self.context.signal_no_more_splits(subtask)  # what is left (if anything) belongs to other subtasks
            return
        self.context.assign_split(self.pending.pop(pick), subtask)

    def add_splits_back(self, splits: list[SplitT], subtask: int) -> None:
        self.pending.extend(splits)

    def add_reader(self, subtask: int) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> list[SplitT]:
        return list(self.pending)


def restored_splits(checkpoint: Any, source_name: str, valid: Callable[[Any], bool]) -> list[Any]:
    """The pending splits of a StaticSplitEnumerator's checkpoint, each checked with `valid`."""
    if not isinstance(checkpoint, list) or not all(valid(s) for s in checkpoint):
        raise _foreign(source_name, checkpoint)
    return list(checkpoint)


def _foreign(source_name: str, checkpoint: Any) -> Exception:
    from runtime.core.errors import InvalidProgramError

    return InvalidProgramError(
        f"{source_name}: the checkpoint's split enumerator state ({type(checkpoint).__name__}) is not this source's; "
        "it belongs to another source under the same uid: give this source its own uid or start without the checkpoint"
    )


__all__ = ["StaticSplitEnumerator", "restored_splits"]
