"""The checkpoint Delta table: commit, replay, retention, savepoints, discard."""
from __future__ import annotations

import glob
import json
import os
from typing import Any

import pytest

from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.errors import ConfigurationError, StorageError
from runtime.core.keygroups import KeyGroupRange
from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore
from runtime.storage.state_files import read_operator_state, write_state_file

pytestmark = pytest.mark.unit

JOB = "job-1"


def write_checkpoint(root: str, cid: int, parallelism: int = 2, savepoint: bool = False) -> CheckpointMetadata:
    """What the JobMaster assembles from its tasks' acknowledgements."""
    files = [
        write_state_file(root, cid, i, 0, parallelism, {"op": OperatorSnapshot(
            keyed={64 * i: {"s": ("value", [(i, None, cid)])}}, operator_lists={"l": [f"{cid}-{i}"]})})
        for i in range(parallelism)
    ]
    return CheckpointMetadata(
        job_id=JOB, checkpoint_id=cid, timestamp_ms=1000 * cid, is_savepoint=savepoint,
        files=files, operator_files={"op": [f.path for f in files]},
        committables={"sink": [b"c0", b"c1"]}, parallelism={"op": parallelism},
    )


def data_files(root: str) -> set[str]:
    return {os.path.relpath(p, root) for p in glob.glob(f"{root}/checkpoint_id=*/*.parquet")}


def log_actions(root: str, kind: str) -> list[dict[str, Any]]:
    out = []
    for p in sorted(glob.glob(f"{root}/_delta_log/*.json")):
        for line in open(p):
            a = json.loads(line)
            if kind in a:
                out.append(a[kind])
    return out


def test_commit_creates_the_table_and_latest_returns_the_metadata(tmp_path: Any) -> None:
    root = str(tmp_path / "_checkpoints" / JOB)
    store = CheckpointStore(root, JOB)
    assert store.latest() is None and store.completed_ids() == [] and store.get(1) is None
    m = write_checkpoint(root, 1)
    version = store.commit(m)
    assert version == 0
    latest = store.latest()
    assert latest is not None and latest.checkpoint_id == 1 and latest.files == m.files
    assert latest.committables == {"sink": [b"c0", b"c1"]} and latest.parallelism == {"op": 2}
    assert latest.completed_ms > 0 and latest.state_size == sum(f.size for f in m.files)
    # a fresh store (a new JobMaster) reads the same from the table alone
    fresh = CheckpointStore(root, JOB)
    assert fresh.latest() == latest and fresh.completed_ids() == [1] and fresh.get(1) == latest
    # the restore path: a task reads its state through the metadata's file lists
    ctx = read_operator_state(root, latest.operator_files["op"], "op", KeyGroupRange(64, 127), 1, 2)
    assert ctx.keyed == {64: {"s": ("value", [(1, None, 1)])}} and ctx.operator_lists == {"l": ["1-1"]}


def test_table_is_readable_by_deltalake_with_the_partition_column(tmp_path: Any) -> None:
    from deltalake import DeltaTable

    root = str(tmp_path / "cp")
    CheckpointStore(root, JOB).commit(write_checkpoint(root, 3))
    dt = DeltaTable(root)
    assert dt.metadata().partition_columns == ["checkpoint_id"]
    t = dt.to_pyarrow_table()
    assert "checkpoint_id" in t.column_names and set(t.column("checkpoint_id").to_pylist()) == {3}
    kinds = sorted(t.column("kind").to_pylist())
    assert kinds == ["keyed", "keyed", "meta", "operator", "operator"]
    assert dt.transaction_version(f"millrace-checkpoints-{JOB}") == 3
    adds = log_actions(root, "add")
    assert all(a["partitionValues"] == {"checkpoint_id": "3"} for a in adds)
    assert sorted(json.loads(a["stats"])["numRecords"] for a in adds) == [1, 2, 2]


def test_replayed_commit_adds_nothing(tmp_path: Any) -> None:
    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB, num_retained=2)
    m = write_checkpoint(root, 1)
    v = store.commit(m)
    files_before = data_files(root)
    assert store.commit(m) == v  # same store
    assert CheckpointStore(root, JOB, num_retained=2).commit(m) == v  # after a JobMaster fail-over
    assert len(log_actions(root, "add")) == 3 and data_files(root) == files_before  # no second meta file either


def test_retention_removes_older_checkpoint_rows_and_files(tmp_path: Any) -> None:
    from deltalake import DeltaTable

    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB, num_retained=1)
    m1 = write_checkpoint(root, 1)
    store.commit(m1)
    old_files = data_files(root)
    m2 = write_checkpoint(root, 2)
    store.commit(m2)
    assert store.completed_ids() == [2]
    assert not (old_files & data_files(root)), "files of the subsumed checkpoint were not deleted"
    assert not os.path.exists(os.path.join(root, "checkpoint_id=1"))
    t = DeltaTable(root).to_pyarrow_table()
    assert set(t.column("checkpoint_id").to_pylist()) == {2}
    # removal was metadata-only: no file was added by the delete
    assert {a["path"] for a in log_actions(root, "remove")} == old_files
    assert len(log_actions(root, "add")) == 6  # the delete rewrote nothing
    latest = store.latest()
    assert latest is not None and latest.checkpoint_id == 2
    ctx = read_operator_state(root, latest.operator_files["op"], "op", KeyGroupRange(0, 63), 0, 2)
    assert ctx.keyed == {0: {"s": ("value", [(0, None, 2)])}}


def test_num_retained_keeps_that_many(tmp_path: Any) -> None:
    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB, num_retained=2)
    for cid in (1, 2, 3, 5):
        store.commit(write_checkpoint(root, cid, parallelism=1))
    assert store.completed_ids() == [3, 5]
    assert {p.split("/")[0] for p in data_files(root)} == {"checkpoint_id=3", "checkpoint_id=5"}


def test_savepoints_are_never_subsumed(tmp_path: Any) -> None:
    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB, num_retained=1)
    store.commit(write_checkpoint(root, 1, parallelism=1))
    sp = write_checkpoint(root, 2, parallelism=1, savepoint=True)
    store.commit(sp)
    assert store.completed_ids() == [1, 2]  # the savepoint does not count against retention
    assert store.latest().checkpoint_id == 2 and store.latest(include_savepoints=False).checkpoint_id == 1
    store.commit(write_checkpoint(root, 3, parallelism=1))
    store.commit(write_checkpoint(root, 4, parallelism=1))
    assert store.completed_ids() == [2, 4]
    assert {f.path for f in sp.files} <= data_files(root)
    assert store.get(2).is_savepoint and store.get(1) is None


def test_discard_deletes_files_and_tolerates_missing_ones(tmp_path: Any) -> None:
    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB)
    store.commit(write_checkpoint(root, 1, parallelism=1))
    pending = write_checkpoint(root, 2)  # never completes
    paths = [f.path for f in pending.files]
    store.discard(paths + ["checkpoint_id=2/state-9-0-gone.parquet"])
    assert not any(os.path.exists(os.path.join(root, p)) for p in paths)
    assert not os.path.exists(os.path.join(root, "checkpoint_id=2"))
    store.discard(paths)  # again: nothing left, no error
    assert store.completed_ids() == [1] and store.latest().checkpoint_id == 1


def test_bad_metadata_is_refused_before_anything_is_written(tmp_path: Any) -> None:
    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB)
    m = write_checkpoint(root, 1, parallelism=1)
    with pytest.raises(StorageError, match="job 'other'"):
        store.commit(m.model_copy(update={"job_id": "other"}))
    with pytest.raises(StorageError, match="not among the checkpoint's files"):
        store.commit(m.model_copy(update={"operator_files": {"op": ["checkpoint_id=1/nope.parquet"]}}))
    assert not os.path.exists(os.path.join(root, "_delta_log"))
    assert [p for p in data_files(root) if "metadata-" in p] == []
    with pytest.raises(ConfigurationError, match="num-retained"):
        CheckpointStore(root, JOB, num_retained=0)


def test_delta_log_checkpoint_every_interval(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.storage.checkpoint_store as cs

    monkeypatch.setattr(cs, "LOG_CHECKPOINT_INTERVAL", 4)  # 100 in production; delta-rs itself only at 99
    root = str(tmp_path / "cp")
    store = CheckpointStore(root, JOB, num_retained=1)
    m = write_checkpoint(root, 1, parallelism=1)
    store.commit(m)
    # retention makes two versions per checkpoint: versions 0, 1-2, 3-4 cross version 4
    for cid in (2, 3):
        store.commit(m.model_copy(update={"checkpoint_id": cid, "files": [], "operator_files": {}}))
    assert store._table().version() == 4
    assert glob.glob(f"{root}/_delta_log/*.checkpoint.parquet")
    assert CheckpointStore(root, JOB).completed_ids() == [3]
