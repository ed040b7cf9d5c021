"""Checkpoint and savepoint messages, across protocols: triggers and notifications to tasks, their
acknowledgements and declines to the JobMaster, savepoint triggers through the Dispatcher, statistics
(Flink: runtime.messages.checkpoint)."""
from __future__ import annotations

from pydantic import Field

from runtime.rpc.messages.common import ErrorInfo, Message
from runtime.storage.handles import StateFileHandle


class TaskStateSnapshot(Message):
    files: list[StateFileHandle] = Field(default_factory=list)
    # operator id -> state files of earlier checkpoints (this task's) that its state builds on
    # (incremental checkpoints: Flink's shared state); retention keeps them while referenced
    shared_files: dict[str, list[str]] = Field(default_factory=dict)
    # operator id -> cloudpickle of that subtask's committables (two-phase-commit sinks)
    committables: dict[str, bytes] = Field(default_factory=dict)

    @property
    def state_size(self) -> int:
        return sum(f.size for f in self.files)


class SavepointOptions(Message):
    """What makes a triggered checkpoint a savepoint (Flink: CheckpointOptions of type SAVEPOINT)."""

    target: str  # the savepoint's Delta table; every task writes its state files there
    # stop-with-savepoint: sources emit nothing after the barrier (and, with drain, a MAX watermark
    # before it); the job ends once the savepoint completes, or goes on if it fails
    stop: bool = False
    drain: bool = False


class TriggerCheckpoint(Message):
    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    timestamp_ms: int
    mode: str = "EXACTLY_ONCE"
    savepoint: SavepointOptions | None = None


class NotifyCheckpoint(Message):
    """JobMaster -> task: checkpoint complete (True) or aborted (False)."""

    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    completed: bool


class AcknowledgeCheckpoint(Message):
    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    state: TaskStateSnapshot = Field(default_factory=TaskStateSnapshot)
    sync_ms: int = 0
    async_ms: int = 0
    alignment_ms: int = 0
    start_delay_ms: int = 0  # trigger -> the barrier reached this task (Flink: checkpointStartDelay)


class DeclineCheckpoint(Message):
    job_id: str
    execution_attempt_id: str
    checkpoint_id: int
    reason: str
    # False for declines that say nothing about checkpointing health (the task is not running, the
    # checkpoint was subsumed by a newer one): Flink's CheckpointFailureManager does not count them
    counts_as_failure: bool = True


class TriggerSavepoint(Message):
    """Client -> Dispatcher -> JobMaster (Flink: triggerSavepoint / stopWithSavepoint)."""

    job_id: str
    target_directory: str | None = None  # None: state.savepoints.dir, else <warehouse>/_savepoints/<job name>
    stop: bool = False
    drain: bool = False


class SavepointTriggerId(Message):
    job_id: str
    trigger_id: str


class SavepointStatusRequest(Message):
    job_id: str
    trigger_id: str


class SavepointStatus(Message):
    """Flink's AsynchronousOperationResult of a savepoint: IN_PROGRESS, then COMPLETED with the
    location or FAILED with the cause."""

    job_id: str
    trigger_id: str
    status: str  # IN_PROGRESS | COMPLETED | FAILED
    location: str | None = None
    failure: ErrorInfo | None = None


class SavepointLocation(Message):
    location: str
    checkpoint_id: int


class CheckpointStatisticsMessage(Message):
    """Checkpoint counts, latest and history (Flink: /jobs/{id}/checkpoints); the statistics as JSON."""

    job_id: str
    enabled: bool
    interval_ms: int = 0
    mode: str = ""
    path: str | None = None
    statistics_json: str = "{}"
