"""DeltaSource: every row of the pinned version exactly once, split by file across subtasks."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from runtime.api.common.typeinfo import Types
from runtime.api.connectors.delta_source import DeltaSource, assign_files
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch
from runtime.storage.delta_read import DeltaFile, snapshot, table_version
from tests.harness import run_source

pytestmark = pytest.mark.unit


def _table(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids], "part": [i % 3 for i in ids]})


def _write_in_files(path: Path, files: int, rows_per_file: int, **kw) -> None:
    for k in range(files):
        write_deltalake(str(path), _table(rows_per_file, k * rows_per_file), mode="append", **kw)


def _read_all(source: DeltaSource, parallelism: int) -> list[list[dict]]:
    outs = [run_source(source.create_operator(), subtask=i, parallelism=parallelism) for i in range(parallelism)]
    for o in outs:
        assert o.watermarks == [MAX_TIMESTAMP]  # a bounded source ends event time
        assert all(isinstance(b, ColumnBatch) for b in o.batches)
    return [[r.as_dict() for r in o.values()] for o in outs]


@pytest.mark.parametrize("files,parallelism", [(1, 1), (5, 2), (3, 4), (7, 3)])
def test_every_row_exactly_once_across_subtasks(tmp_path, files, parallelism):
    _write_in_files(tmp_path / "t", files, 10)
    per_subtask = _read_all(DeltaSource.for_path(str(tmp_path / "t")), parallelism)
    ids = sorted(r["id"] for rows in per_subtask for r in rows)
    assert ids == list(range(files * 10))
    # split by file: a subtask reads whole files (multiples of 10 rows), never part of one
    assert all(len(rows) % 10 == 0 for rows in per_subtask)
    assert sum(1 for rows in per_subtask if rows) == min(files, parallelism)


def test_assignment_balances_bytes_and_is_deterministic():
    files = [DeltaFile(f"f{i}", size, 1) for i, size in enumerate([100, 10, 90, 20, 80])]
    a = assign_files(files, 2)
    assert a == assign_files(files, 2)
    assert sorted(i for s in a for i in s) == list(range(5))
    loads = [sum(files[i].size for i in s) for s in a]
    assert max(loads) - min(loads) <= max(f.size for f in files)  # greedy (LPT) bound
    assert sorted(len(s) for s in assign_files(files, 5)) == [1] * 5


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


def test_small_batches(tmp_path):
    _write_in_files(tmp_path / "t", 1, 25)
    out = run_source(DeltaSource.for_path(str(tmp_path / "t"), batch_size=10).create_operator())
    assert [len(b) for b in out.batches] == [10, 10, 5]


def test_missing_table_and_unknown_column_are_program_errors(tmp_path):
    with pytest.raises(InvalidProgramError, match="no Delta table"):
        DeltaSource.for_path(str(tmp_path / "nothing"))
    _write_in_files(tmp_path / "t", 1, 3)
    with pytest.raises(InvalidProgramError, match="not in the table"):
        DeltaSource.for_path(str(tmp_path / "t"), columns=["id", "nope"])
    assert table_version(str(tmp_path / "nothing")) is None
