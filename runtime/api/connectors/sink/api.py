"""Sink V2 (Flink's org.apache.flink.api.connector.sink2): a writer per subtask, a committer on the JobMaster.

- `SinkWriter` (each sink subtask): `write` batches, `flush`, and `prepare_commit()` hands over what
  it wrote since the last call as committables (its pre-commit: files closed, not yet visible);
  `snapshot_state` is its own state (e.g. a part counter); `abort()` removes what it wrote and never
  handed over, when its attempt ends without finishing.
- `Committer` (one per sink, on the JobMaster: Flink's Committer with the global committer's
  reach, since it sees every subtask's committables of a checkpoint at once): `commit` makes one
  checkpoint's committables visible, idempotently (a committable may come again: a writer offers
  it until it hears its checkpoint completed, and a restore commits the restored checkpoint);
  `restore` applies a connector's restore rules; `commit_end` commits a bounded job's tail;
  `discard` / `clean_up` / `retain` / `close` are the clean-up hooks.

The generic two-phase-commit wrapper (`writer_operator.py`, `committer.py`) carries what every such
sink needs: committables in checkpoints and re-offered until committed, the tail at end of input,
FLIP-147's final committables, winner-only commits of speculative attempts, and the calls to the
clean-up hooks on restore and on a job that did not finish. A connector keeps only what is its own.
"""
from __future__ import annotations

import abc
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from runtime.core.records import RecordBatch

CommT = TypeVar("CommT")

WRITER_STATE = "sink-writer"  # operator list state: the writer's own state


class DeliveryGuarantee(enum.Enum):
    """What a sink promises about its records through failures (Flink's org.apache.flink.connector.base.DeliveryGuarantee)."""

    EXACTLY_ONCE = "exactly-once"  # each record once, visible when the checkpoint that holds it completes
    AT_LEAST_ONCE = "at-least-once"  # nothing lost: a checkpoint waits until the records before it are acknowledged
    NONE = "none"  # best effort: records may be lost or duplicated


class SinkWriterContext(Protocol):
    """What a writer learns of its subtask (Flink: WriterInitContext)."""

    @property
    def job_id(self) -> str: ...

    @property
    def subtask_index(self) -> int: ...

    @property
    def parallelism(self) -> int: ...

    @property
    def attempt_number(self) -> int: ...

    @property
    def restored_state(self) -> list[Any]:
        """The writers' states of the restored checkpoint dealt to this subtask (empty when fresh)."""
        ...

    @property
    def restored_checkpoint_id(self) -> int | None:
        """The checkpoint this attempt restores from (None when fresh): Flink's InitContext#getRestoredCheckpointId."""
        ...

    @property
    def config(self) -> Mapping[str, str]: ...


class SinkWriter(abc.ABC, Generic[CommT]):
    @abc.abstractmethod
    def write(self, batch: RecordBatch) -> None: ...

    def flush(self, end_of_input: bool) -> None:
        """Before a checkpoint (False) and at the end of input (True)."""

    @abc.abstractmethod
    def prepare_commit(self) -> list[CommT]:
        """What was written since the last call, ready to commit (files closed), as committables."""

    def snapshot_state(self, checkpoint_id: int) -> list[Any]:
        return []

    def abort(self) -> None:
        """The attempt ends without finishing: remove what it wrote and never handed over."""

    def close(self) -> None:
        pass


class CommitterContext(Protocol):
    @property
    def job_id(self) -> str: ...

    @property
    def operator_name(self) -> str: ...

    def current_parallelism(self) -> int: ...


class Committer(abc.ABC, Generic[CommT]):
    """Committables arrive per subtask (`by_subtask[i]`: subtask i's, in order)."""

    def start(self) -> None:
        """The job starts (before any writer writes): take a lease, check the location."""

    @abc.abstractmethod
    def commit(self, checkpoint_id: int, by_subtask: list[list[CommT]]) -> None:
        """Checkpoint `checkpoint_id` is durable: make its committables visible, once (idempotent)."""

    def restore(self, checkpoint_id: int, by_subtask: list[list[CommT]]) -> None:
        """A restart from `checkpoint_id`: commit what it holds that never was (the default)."""
        self.commit(checkpoint_id, by_subtask)

    @abc.abstractmethod
    def commit_end(self, last_checkpoint: int | None, by_subtask: list[list[CommT]]) -> dict[str, Any]:
        """Every writer finished: commit their tails (what no checkpoint committed); metadata for the job result."""

    def discard(self, committables: list[CommT]) -> None:
        """These will never be committed (a superseded attempt's, a job that did not finish): delete them."""

    def retain(self, committables: list[CommT]) -> None:
        """A later run may restore a checkpoint holding these and commit them: never delete them here."""

    def clean_up(self, subtasks: set[int]) -> None:
        """These subtasks restart: delete what their earlier attempts wrote that nothing references."""

    def close(self, finished: bool, uncommitted: list[CommT]) -> None:
        """The job ended; `finished`: it committed its end. Otherwise `uncommitted` is every tail
        and superseded committable the coordinator held: delete them and the orphans."""


class TwoPhaseCommittingSink(abc.ABC, Generic[CommT]):
    """What a Sink V2 connector implements (mixed into `runtime.api.connectors.base.Sink`)."""

    @abc.abstractmethod
    def create_sink_writer(self, context: SinkWriterContext) -> SinkWriter[CommT]: ...

    @abc.abstractmethod
    def create_committer(self, context: CommitterContext) -> Committer[CommT]: ...


# --- what travels between the halves --------------------------------------------------------------


@dataclass(frozen=True)
class SinkTailEvent:
    """Writer -> coordinator at the end of input: every committable no completed checkpoint covers."""

    committables: list[Any]


@dataclass(frozen=True)
class FinalCommittables:
    """FLIP-147: a finished subtask's tail, held by a checkpoint as that subtask's committables."""

    committables: list[Any] = field(default_factory=list)


def unwrap(per_subtask: list[Any] | None) -> tuple[list[Any], bool]:
    """(committables, final) of one subtask's entry in a checkpoint."""
    items = list(per_subtask or [])
    if len(items) == 1 and isinstance(items[0], FinalCommittables):
        return list(items[0].committables), True
    return items, False


__all__ = [
    "WRITER_STATE", "Committer", "CommitterContext", "DeliveryGuarantee", "FinalCommittables", "SinkTailEvent", "SinkWriter", "SinkWriterContext",
    "TwoPhaseCommittingSink", "unwrap",
]
