"""Snapshot files that arrive after their checkpoint or savepoint was given up (issue 24): the
JobMaster deletes a late acknowledgement's files also after the job ended, and a task deletes what
its attempt wrote for a snapshot it will not acknowledge (a state file, a killed writer's temp
file, then an emptied savepoint folder), never anyone else's file or a committed savepoint."""
from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from runtime.jobmanager.checkpoint.config import CheckpointCoordinatorConfiguration
from runtime.jobmanager.checkpoint.coordinator import CheckpointCoordinator
from runtime.rpc import messages as m
from runtime.storage.savepoints import discard_task_snapshot

pytestmark = pytest.mark.unit


class Store:
    def __init__(self) -> None:
        self.discarded: list[tuple[str | None, list[str]]] = []
        self.done = threading.Event()

    def discard(self, files: list[str], checkpoint_id: int | None = None) -> None:
        self.discarded.append((None, files))
        self.done.set()

    def discard_savepoint(self, location: str, files: list[str]) -> None:
        self.discarded.append((location, files))
        self.done.set()


def _ack(cid: int, path: str) -> m.AcknowledgeCheckpoint:
    return m.AcknowledgeCheckpoint(
        job_id="job", execution_attempt_id="src-0", checkpoint_id=cid,
        state=m.TaskStateSnapshot(files=[m.StateFileHandle(path=path, size=1, rows=1, operator_ids=["source"])]),
    )


def test_a_late_acknowledgement_after_the_job_ended_still_has_its_files_deleted() -> None:
    store = Store()
    host = SimpleNamespace(spawn=lambda coro: asyncio.get_event_loop().create_task(coro), call_later=lambda *a: None)
    cfg = CheckpointCoordinatorConfiguration(interval_ms=500, timeout_ms=2000, table_uri="memory://checkpoints")
    cc = CheckpointCoordinator("job", cfg, store, host)
    cc._savepoint_targets[7] = "/sp/savepoint-1"  # savepoint 7 was triggered, then the job was cancelled
    cc.shutdown()  # the job ended: the coordinator's I/O thread is gone
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(cc.receive_acknowledge(_ack(7, "checkpoint_id=7/state-0-0-x.parquet")))
    finally:
        loop.close()
    assert store.done.wait(10)
    assert store.discarded == [("/sp/savepoint-1", ["checkpoint_id=7/state-0-0-x.parquet"])]


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_a_task_deletes_only_its_own_attempts_files_and_an_emptied_savepoint_folder(tmp_path: Path) -> None:
    sp = tmp_path / "savepoint-a"
    part = sp / "checkpoint_id=3"
    mine = [_touch(part / "state-1-0-aaa.parquet"), _touch(part / ".state-1-0-bbb.parquet.1234abcd.inprogress")]
    other_attempt = _touch(part / "state-1-1-ccc.parquet")
    other_subtask = _touch(part / "state-0-0-ddd.parquet")
    gone = discard_task_snapshot(str(sp), True, 3, 1, 0)
    assert sorted(Path(p).name for p in gone) == sorted(p.name for p in mine)
    assert other_attempt.exists() and other_subtask.exists()  # another writer is still at work: the folder stays
    discard_task_snapshot(str(sp), True, 3, 1, 1)
    discard_task_snapshot(str(sp), True, 3, 0, 0)
    assert not sp.exists()  # the last one out removes the savepoint's folder


def test_a_committed_savepoint_and_a_checkpoint_table_keep_their_folders(tmp_path: Path) -> None:
    sp = tmp_path / "savepoint-b"
    _touch(sp / "_delta_log" / "00000000000000000000.json")
    _touch(sp / "checkpoint_id=3" / "state-0-0-committed.parquet")
    late = _touch(sp / "checkpoint_id=4" / "state-0-0-late.parquet")
    discard_task_snapshot(str(sp), True, 4, 0, 0)
    assert not late.exists() and not late.parent.exists()
    assert (sp / "checkpoint_id=3" / "state-0-0-committed.parquet").exists() and (sp / "_delta_log").is_dir()
    table = tmp_path / "checkpoints" / "job"
    kept = _touch(table / "checkpoint_id=2" / "state-0-0-old.parquet")
    _touch(table / "checkpoint_id=5" / ".state-0-0-k.parquet.0badf00d.inprogress")
    discard_task_snapshot(str(table), False, 5, 0, 0)
    assert kept.exists() and not (table / "checkpoint_id=5").exists()
