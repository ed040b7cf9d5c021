"""DeltaSource on FLIP-27, tested on the connector harnesses (runtime.api.connectors.source.testing):
bounded (one pinned version) and continuous (following new commits), every row exactly once."""
from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from runtime.api.common.typeinfo import Types
from runtime.api.connectors.delta_source import DeltaEnumeratorState, DeltaSource, DeltaSplit, DeltaTableChangeError
from runtime.api.connectors.source.testing import (
    SourceHarness,
    TestingReaderContext,
    TestingReaderOutput,
    TestingSplitEnumeratorContext,
    poll_until,
)
from runtime.core.errors import InvalidProgramError
from runtime.core.operators import InputStatus
from runtime.core.records import ColumnBatch
from runtime.storage.delta_read import snapshot, table_version

pytestmark = pytest.mark.unit


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], "part": [i % 3 for i in ids]})


def _write_in_files(path: Path, files: int, rows_per_file: int, start: int = 0, **kw) -> None:
    for k in range(files):
        write_deltalake(str(path), _table(rows_per_file, start + k * rows_per_file), mode="append", **kw)


def _read_all(source: DeltaSource, parallelism: int) -> list[list[dict]]:
    h = SourceHarness(source, parallelism)
    h.run_until_idle()
    assert all(s is InputStatus.END_OF_INPUT for s in h.status.values()), h.status  # bounded: every reader ends
    assert all(isinstance(b, ColumnBatch) for o in h.outputs for _, b in o.batches)
    return [[r.as_dict() for r in o.rows()] for o in h.outputs]


def _ids(h: SourceHarness) -> list[int]:
    return sorted(r.as_dict()["id"] for r in h.rows())


# --- bounded ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("files,parallelism", [(1, 1), (5, 2), (3, 4), (7, 3)])
def test_every_row_exactly_once_across_subtasks(tmp_path, files, parallelism):
    _write_in_files(tmp_path / "t", files, 10)
    per_subtask = _read_all(DeltaSource.for_path(str(tmp_path / "t")), parallelism)
    ids = sorted(r["id"] for rows in per_subtask for r in rows)
    assert ids == list(range(files * 10))
    # split by file: a subtask reads whole files (multiples of 10 rows), never part of one
    assert all(len(rows) % 10 == 0 for rows in per_subtask)
    assert sum(1 for rows in per_subtask if rows) == min(files, parallelism)


def test_readers_get_one_file_per_request_and_then_no_more_splits(tmp_path):
    _write_in_files(tmp_path / "t", 3, 4)
    source = DeltaSource.for_path(str(tmp_path / "t"))
    ctx = TestingSplitEnumeratorContext(2)
    enum = source.create_enumerator(ctx)
    enum.start()
    assert not ctx.callables  # bounded: nothing to discover
    ctx.register_reader(0)
    ctx.register_reader(1)
    for subtask in (0, 1, 0):
        enum.handle_split_request(subtask, None)
    assert [s.split_id for s in ctx.assignments[0]] == ["2-0", "2-2"] and [s.split_id for s in ctx.assignments[1]] == ["2-1"]
    enum.handle_split_request(1, None)
    assert ctx.no_more_splits == {1}
    enum.add_splits_back(ctx.assignments[1], 1)  # reader 1 failed before its checkpoint: its file goes out again
    enum.handle_split_request(0, None)
    assert [s.split_id for s in ctx.assignments[0]][-1] == "2-1"


def test_version_is_pinned_when_the_source_is_built(tmp_path):
    path = str(tmp_path / "t")
    _write_in_files(tmp_path / "t", 2, 5)  # versions 0, 1
    source = DeltaSource.for_path(path)
    write_deltalake(path, _table(5, 100), mode="append")  # version 2 written after the job was built
    assert source.snapshot_version == 1 and table_version(path) == 2
    assert sorted(r["id"] for rows in _read_all(source, 2) for r in rows) == list(range(10))
    old = DeltaSource.for_path(path, version=0)
    assert sorted(r["id"] for rows in _read_all(old, 1) for r in rows) == list(range(5))


def test_partition_columns_and_projection(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _table(12), mode="append", partition_by=["part"])
    snap = snapshot(path)
    assert len(snap.files) == 3 and snap.num_records == 12
    rows = [r for rows in _read_all(DeltaSource.for_path(path), 2) for r in rows]
    assert sorted((r["id"], r["part"]) for r in rows) == [(i, i % 3) for i in range(12)]
    projected = DeltaSource.for_path(path, columns=["part", "id"])
    assert list(projected.schema.names) == ["part", "id"]
    assert projected.get_type_info() == Types.ROW_NAMED(["part", "id"], [Types.LONG(), Types.LONG()])
    got = [r for rows in _read_all(projected, 1) for r in rows]
    assert sorted((r["id"], r["part"]) for r in got) == [(i, i % 3) for i in range(12)]
    assert set(got[0]) == {"part", "id"}


def test_reader_small_batches_split_ids_and_release(tmp_path):
    _write_in_files(tmp_path / "t", 1, 25)
    source = DeltaSource.for_path(str(tmp_path / "t"), batch_size=10)
    ctx = TestingReaderContext()
    reader = source.create_reader(ctx)
    reader.start()
    assert ctx.split_requests == 1  # a reader without splits asks at once
    reader.add_splits(source.initial_state().pending)
    out = TestingReaderOutput()
    poll_until(reader, out, lambda s: s is InputStatus.NOTHING_AVAILABLE)
    assert [(sid, len(b)) for sid, b in out.batches] == [("0-0", 10), ("0-0", 10), ("0-0", 5)]
    assert out.released == ["0-0"] and ctx.split_requests == 2
    reader.notify_no_more_splits()
    assert reader.poll_next(out) is InputStatus.END_OF_INPUT


def test_a_restored_split_goes_on_from_its_row(tmp_path):
    _write_in_files(tmp_path / "t", 2, 25)
    source = DeltaSource.for_path(str(tmp_path / "t"), batch_size=10)
    h = SourceHarness(source, 1)
    for _ in range(2):  # 10 + 10 of the first file's 25 rows
        h.step()
    cp = h.checkpoint()
    (split, *rest), = cp.reader_splits.values()
    assert split.rows_done == 20 and split.split_id == "1-0"
    for p in (1, 2, 3):
        after = SourceHarness(source, p, cp)
        after.run_until_idle()
        assert sorted(_ids(h)[:20] + _ids(after)) == list(range(50)), p


def test_missing_table_unknown_column_and_bad_options_are_program_errors(tmp_path):
    with pytest.raises(InvalidProgramError, match="no Delta table"):
        DeltaSource.for_path(str(tmp_path / "nothing"))
    _write_in_files(tmp_path / "t", 1, 3)
    path = str(tmp_path / "t")
    with pytest.raises(InvalidProgramError, match="not in the table"):
        DeltaSource.for_path(path, columns=["id", "nope"])
    with pytest.raises(InvalidProgramError, match="options of a continuous source"):
        DeltaSource.for_table(path).ignore_deletes().build()
    with pytest.raises(InvalidProgramError, match="beyond the table's next version"):
        DeltaSource.for_table(path).continuous(100).starting_version(5).build()
    with pytest.raises(InvalidProgramError, match="not both"):
        DeltaSource.for_table(path).continuous(100).starting_version(0).starting_timestamp(0).build()
    bounded = DeltaSource.for_path(path)
    with pytest.raises(InvalidProgramError, match="taken by a continuous source"):
        bounded.restore_enumerator(TestingSplitEnumeratorContext(1), DeltaEnumeratorState([], 3))
    with pytest.raises(InvalidProgramError, match="not a DeltaSource split"):
        bounded.create_reader(TestingReaderContext()).add_splits([("file:///x.parquet", 2)])
    assert table_version(str(tmp_path / "nothing")) is None


# --- continuous -----------------------------------------------------------------------------------------


def test_continuous_reads_the_snapshot_then_each_new_commit_in_order(tmp_path):
    path = tmp_path / "t"
    _write_in_files(path, 2, 5)  # versions 0, 1: the initial snapshot
    source = DeltaSource.for_table(str(path)).continuous(50).build()
    assert not source.is_bounded()
    h = SourceHarness(source, 2)
    h.run_until_idle()
    assert _ids(h) == list(range(10)) and all(s is InputStatus.NOTHING_AVAILABLE for s in h.status.values())
    _write_in_files(path, 3, 5, start=10)  # versions 2, 3, 4
    h.discover()
    h.run_until_idle()
    assert _ids(h) == list(range(25))
    assert set(h.split_ids_emitted()) == {"1-0", "1-1", "2-0", "3-0", "4-0"}
    h.discover()  # nothing new: nothing read twice
    h.run_until_idle()
    assert _ids(h) == list(range(25))


@pytest.mark.parametrize("start", ["version", "latest", "timestamp"])
def test_continuous_starting_points(tmp_path, start):
    path = tmp_path / "t"
    _write_in_files(path, 3, 5)  # versions 0..2
    b = DeltaSource.for_table(str(path)).continuous(50)
    if start == "version":
        b.starting_version(1)
        expected = list(range(5, 15)) + list(range(100, 105))
    elif start == "latest":
        b.starting_from_latest()
        expected = list(range(100, 105))
    else:
        ts = max(h["timestamp"] for h in DeltaTable(str(path)).history() if h["version"] == 2)
        b.starting_timestamp(ts)
        expected = list(range(10, 15)) + list(range(100, 105))
    h = SourceHarness(b.build(), 1)
    write_deltalake(str(path), _table(5, 100), mode="append")  # version 3, after the start
    h.discover()
    h.run_until_idle()
    assert _ids(h) == expected


def test_a_delete_commit_fails_naming_its_version_unless_ignore_deletes(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _table(9), mode="append", partition_by=["part"])  # version 0
    for ignore in (False, True):
        b = DeltaSource.for_table(path).continuous(50).starting_from_latest()
        h = SourceHarness((b.ignore_deletes() if ignore else b).build(), 1)
        if not ignore:
            DeltaTable(path).delete("part = 1")  # version 1: removes a whole partition's file
            write_deltalake(path, _table(3, 100), mode="append", partition_by=["part"])  # version 2
            with pytest.raises(DeltaTableChangeError, match=r"version 1 \(DELETE\) deleted data: it removed 1 file.*ignore_deletes"):
                h.discover()
            continue
        h.discover()
        h.run_until_idle()
        assert _ids(h) == []  # started after version 2: nothing yet
        DeltaTable(path).delete("part = 2")  # version 3: skipped
        write_deltalake(path, _table(3, 200), mode="append", partition_by=["part"])  # version 4
        h.discover()
        h.run_until_idle()
        assert _ids(h) == [200, 201, 202]


def test_a_rewrite_fails_unless_ignore_changes_and_a_schema_change_always_fails(tmp_path):
    path = str(tmp_path / "t")
    write_deltalake(path, _table(4), mode="append")  # version 0: one file
    h = SourceHarness(DeltaSource.for_table(path).continuous(50).ignore_deletes().build(), 1)
    h.run_until_idle()
    DeltaTable(path).update({"name": "'x'"}, predicate="id = 1")  # version 1: rewrites the file
    with pytest.raises(DeltaTableChangeError, match=r"version 1 \(UPDATE\) rewrote data.*ignore_changes"):
        h.discover()
    h = SourceHarness(DeltaSource.for_table(path).continuous(50).starting_version(1).ignore_changes().build(), 1)
    h.discover()
    h.run_until_idle()
    assert _ids(h) == [0, 1, 2, 3]  # the rewritten file, read again (Spark's ignoreChanges)
    write_deltalake(path, pa.table({"id": pa.array([9], pa.int64()), "name": ["n"], "part": [0], "extra": [1.5]}),
                    mode="append", schema_mode="merge")  # version 2: a new column
    with pytest.raises(DeltaTableChangeError, match=r"version 2 \(WRITE\) changed the table's schema.*extra"):
        h.discover()


def test_continuous_checkpoint_restore_at_another_parallelism_reads_no_file_twice(tmp_path):
    path = tmp_path / "t"
    _write_in_files(path, 4, 25)  # versions 0..3
    source = DeltaSource.for_table(str(path)).continuous(50).batch_size(10).build()
    h = SourceHarness(source, 2)
    for _ in range(4):
        h.step()
    _write_in_files(path, 3, 25, start=100)  # versions 4..6
    h.discover()
    h.step()
    cp = h.checkpoint()
    state = pickle.loads(cp.enumerator)
    assert state.next_version == 7 and all(isinstance(s, DeltaSplit) for s in state.pending)
    before = _ids(h)
    _write_in_files(path, 2, 25, start=200)  # versions 7, 8: after the checkpoint
    for p in (1, 3):
        after = SourceHarness(source, p, cp)
        after.discover()
        after.run_until_idle()
        got = sorted(before + _ids(after))
        assert got == list(range(100)) + list(range(100, 175)) + list(range(200, 250)), p


def test_a_failed_reader_gets_back_only_what_it_got_after_the_checkpoint(tmp_path):
    path = tmp_path / "t"
    _write_in_files(path, 3, 10)
    source = DeltaSource.for_table(str(path)).continuous(50).build()
    h = SourceHarness(source, 1)
    cp = h.checkpoint()  # before anything was read: the reader holds file 0 (asked at start)
    h.run_until_idle()
    assert _ids(h) == list(range(30))
    h.fail(0, cp.reader_splits[0])  # restarts from the checkpoint: re-reads what it read since
    h.run_until_idle()
    assert _ids(h) == list(range(30))  # the new attempt's output: every row once, none twice


def test_a_commit_cleaned_from_the_log_fails_naming_it_and_one_not_yet_written_is_waited_for(tmp_path):
    path = tmp_path / "t"
    _write_in_files(path, 3, 2)  # versions 0..2
    h = SourceHarness(DeltaSource.for_table(str(path)).continuous(50).starting_version(1).build(), 1)
    latest = SourceHarness(DeltaSource.for_table(str(path)).continuous(50).starting_from_latest().build(), 1)
    latest.discover()  # version 3 is not written yet: nothing to read, no error
    latest.run_until_idle()
    assert _ids(latest) == []
    (path / "_delta_log" / f"{1:020d}.json").unlink()  # log clean-up outran the job
    with pytest.raises(DeltaTableChangeError, match=r"commit 1 is no longer in the table's log \(version 2 is\)"):
        h.discover()
