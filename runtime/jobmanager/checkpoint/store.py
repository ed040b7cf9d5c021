"""Completed checkpoints of one job, kept in its checkpoint Delta table (Flink: CompletedCheckpointStore).

A thin layer over `runtime.storage.checkpoint_store.CheckpointStore` (which owns the Delta table,
retention and file deletion): it turns a pending checkpoint's acknowledgements into the metadata
that is committed, and is called only from the coordinator's I/O thread.
"""
from __future__ import annotations

from typing import Any

from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore


class CompletedCheckpointStore:
    def __init__(self, job_id: str, table_uri: str, num_retained: int = 1) -> None:
        self.job_id = job_id
        self.table_uri = table_uri
        self._store = CheckpointStore(table_uri, job_id, num_retained=num_retained)

    def metadata_for(self, pending: Any, now: float) -> CheckpointMetadata:
        """The metadata of a pending checkpoint whose every task acknowledged."""
        files = []
        operator_files: dict[str, list[str]] = {}
        committables: dict[str, dict[int, bytes]] = {}
        parallelism: dict[str, int] = {}
        max_parallelism: dict[str, int] = {}
        shared: list[str] = []
        for attempt, ack in pending.acks.items():
            task = pending.tasks[attempt]
            for op in task.operator_ids:
                parallelism[op] = task.parallelism
                max_parallelism[op] = task.max_parallelism
            for f in ack.state.files:
                files.append(f)
                for op in f.operator_ids:
                    operator_files.setdefault(op, []).append(f.path)
            for op, paths in ack.state.shared_files.items():  # earlier checkpoints' files the state builds on
                operator_files.setdefault(op, []).extend(paths)
                shared.extend(paths)
            for op, blob in ack.state.committables.items():
                committables.setdefault(op, {})[task.subtask_index] = blob
        # FLIP-147: finished tasks are recorded (a restore deploys them as finished); their
        # operators' final committables come from the operator coordinators that hold them
        finished: dict[str, list[int]] = {}
        for task in pending.finished:
            for op in task.operator_ids:
                parallelism[op] = task.parallelism
                max_parallelism[op] = task.max_parallelism
                finished.setdefault(op, []).append(task.subtask_index)
        for op, by_subtask in pending.finished_committables.items():
            for subtask, blob in by_subtask.items():
                committables.setdefault(op, {})[subtask] = blob
        return CheckpointMetadata(
            job_id=self.job_id,
            checkpoint_id=pending.checkpoint_id,
            timestamp_ms=pending.timestamp_ms,
            completed_ms=int(now * 1000),
            files=files,
            shared_files=sorted(set(shared)),
            operator_files={op: sorted(set(paths)) for op, paths in operator_files.items()},
            committables={op: [by_subtask[i] for i in sorted(by_subtask)] for op, by_subtask in committables.items()},
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            finished_subtasks={op: sorted(subtasks) for op, subtasks in finished.items()},
            coordinator_states=dict(getattr(pending, "coordinator_states", {})),
            state_size=sum(f.size for f in files),
            duration_ms=int(now * 1000) - pending.timestamp_ms,
        )

    def add(self, metadata: CheckpointMetadata) -> int:
        return self._store.commit(metadata)

    def add_savepoint(self, location: str, metadata: CheckpointMetadata) -> int:
        from runtime.storage.savepoints import commit_savepoint

        return commit_savepoint(location, metadata)

    def discard_savepoint(self, location: str, files: list[str]) -> None:
        from runtime.storage.savepoints import discard_savepoint

        discard_savepoint(location, files)

    def latest(self) -> CheckpointMetadata | None:
        return self._store.latest()

    def discard(self, files: list[str], checkpoint_id: int | None = None) -> None:
        self._store.discard(files, checkpoint_id)

    def remove_uncommitted(self, up_to: int) -> None:
        self._store.remove_uncommitted_partitions(up_to)
