"""Checkpoint statistics in Flink's REST shape (/jobs/{id}/checkpoints): counts, latest, history."""
from __future__ import annotations

from collections import deque
from typing import Any

from pydantic import BaseModel, Field

HISTORY_SIZE = 10


class CheckpointStatsEntry(BaseModel):
    id: int
    status: str  # IN_PROGRESS | COMPLETED | FAILED
    is_savepoint: bool = False
    trigger_timestamp: int
    latest_ack_timestamp: int | None = None
    # Flink's end-to-end duration: trigger -> the last subtask's acknowledgement (every task's
    # state is written then, but the checkpoint does not exist until its Delta commit)
    end_to_end_duration: int | None = None
    commit_duration: int | None = None  # last acknowledgement -> committed to Delta (the checkpoint exists)
    state_size: int = 0
    num_subtasks: int = 0
    num_acknowledged_subtasks: int = 0
    external_path: str | None = None
    failure_message: str | None = None
    # slowest subtask's parts (Flink's per-subtask sync / async / alignment durations)
    max_sync_duration: int = 0
    max_async_duration: int = 0
    max_alignment_duration: int = 0
    max_start_delay: int = 0  # trigger -> the barrier reached the task: data in flight ahead of it


class CheckpointCounts(BaseModel):
    restored: int = 0
    total: int = 0
    in_progress: int = 0
    completed: int = 0
    failed: int = 0


class CheckpointingStatistics(BaseModel):
    counts: CheckpointCounts = Field(default_factory=CheckpointCounts)
    latest_completed: CheckpointStatsEntry | None = None
    latest_savepoint: CheckpointStatsEntry | None = None
    latest_failed: CheckpointStatsEntry | None = None
    latest_restored: int | None = None
    history: list[CheckpointStatsEntry] = Field(default_factory=list)


class CheckpointStatsTracker:
    """Touched only on the JobMaster's main thread; `snapshot()` hands out an immutable copy."""

    def __init__(self) -> None:
        self.counts = CheckpointCounts()
        self._history: deque[CheckpointStatsEntry] = deque(maxlen=HISTORY_SIZE)
        self._by_id: dict[int, CheckpointStatsEntry] = {}
        self.latest_completed: CheckpointStatsEntry | None = None
        self.latest_savepoint: CheckpointStatsEntry | None = None
        self.latest_failed: CheckpointStatsEntry | None = None
        self.latest_restored: int | None = None

    def _now_ms(self) -> int:
        import time

        return int(time.time() * 1000)

    def report_pending(self, cid: int, trigger_ts: int, num_subtasks: int, is_savepoint: bool = False) -> None:
        e = CheckpointStatsEntry(id=cid, status="IN_PROGRESS", is_savepoint=is_savepoint, trigger_timestamp=trigger_ts, num_subtasks=num_subtasks)
        self._history.appendleft(e)
        self._by_id = {x.id: x for x in self._history}
        self.counts.total += 1
        self.counts.in_progress += 1

    def report_ack(self, cid: int, size: int, sync_ms: int = 0, async_ms: int = 0, alignment_ms: int = 0, start_delay_ms: int = 0) -> None:
        e = self._by_id.get(cid)
        if e is not None:
            e.num_acknowledged_subtasks += 1
            e.state_size += size
            e.latest_ack_timestamp = self._now_ms()
            e.max_sync_duration = max(e.max_sync_duration, sync_ms)
            e.max_async_duration = max(e.max_async_duration, async_ms)
            e.max_alignment_duration = max(e.max_alignment_duration, alignment_ms)
            e.max_start_delay = max(e.max_start_delay, start_delay_ms)

    def report_completed(self, cid: int, metadata: Any, path: str) -> None:
        e = self._by_id.get(cid)
        if e is None:
            return
        e.status = "COMPLETED"
        e.end_to_end_duration = int(metadata.duration_ms)
        e.commit_duration = max(0, self._now_ms() - e.trigger_timestamp - e.end_to_end_duration)
        e.state_size = int(metadata.state_size)
        e.external_path = path
        self.counts.in_progress -= 1
        self.counts.completed += 1
        if e.is_savepoint:  # Flink keeps the latest savepoint apart from the latest checkpoint
            self.latest_savepoint = e.model_copy()
        else:
            self.latest_completed = e.model_copy()

    def report_failed(self, cid: int, reason: str) -> None:
        e = self._by_id.get(cid)
        if e is None:
            return
        e.status = "FAILED"
        e.failure_message = reason
        e.end_to_end_duration = self._now_ms() - e.trigger_timestamp
        self.counts.in_progress -= 1
        self.counts.failed += 1
        self.latest_failed = e.model_copy()

    def report_restored(self, cid: int) -> None:
        self.counts.restored += 1
        self.latest_restored = cid

    def snapshot(self) -> CheckpointingStatistics:
        return CheckpointingStatistics(
            counts=self.counts.model_copy(),
            latest_completed=self.latest_completed,
            latest_savepoint=self.latest_savepoint,
            latest_failed=self.latest_failed,
            latest_restored=self.latest_restored,
            history=[e.model_copy() for e in self._history],
        )
