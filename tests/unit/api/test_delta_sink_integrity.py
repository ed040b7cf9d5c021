"""The Delta sink never corrupts or silently drops data (findings of the data-integrity review)."""
from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest

from runtime.api.connectors.delta import DeltaSink, DeltaSinkCoordinator
from runtime.core.errors import StorageError
from runtime.core.operators import FixedCoordinatorContext
from runtime.core.records import ColumnBatch
from tests.harness import FakeEventGateway, run_one_input

pytestmark = pytest.mark.unit

deltalake = pytest.importorskip("deltalake")


def _write(sink: DeltaSink, coord, subtask: int, parallelism: int, batches, attempt: int = 0) -> None:
    gw = FakeEventGateway(coordinator=coord, subtask=subtask, attempt=attempt)
    run_one_input(sink.create_writer(), batches, subtask=subtask, parallelism=parallelism, attempt=attempt, gateway=gw)


def _cols(**cols) -> ColumnBatch:
    return ColumnBatch({k: np.asarray(v) for k, v in cols.items()})


def _files_on_disk(path: str) -> list[str]:
    return sorted(f for f in os.listdir(path) if f.endswith(".parquet"))


def _job(path: str, batches_per_subtask, mode: str = "append", job_id: str = "job", sink: DeltaSink | None = None) -> dict:
    sink = sink or DeltaSink(path, mode=mode)
    coord = DeltaSinkCoordinator(sink, FixedCoordinatorContext(job_id, "sink", len(batches_per_subtask)))
    for i, batches in enumerate(batches_per_subtask):
        _write(sink, coord, i, len(batches_per_subtask), batches)
    try:
        return coord.on_job_finished()
    finally:
        coord.close()


def test_a_commit_that_landed_before_an_error_is_not_reported_as_failed_nor_its_files_deleted(tmp_path) -> None:
    path = str(tmp_path / "t")
    _job(path, [[_cols(x=[1])]])
    real = deltalake.DeltaTable.create_write_transaction

    def commit_then_fail(self, *a, **kw):
        real(self, *a, **kw)
        raise OSError("post-commit step failed")

    with mock.patch.object(deltalake.DeltaTable, "create_write_transaction", commit_then_fail):
        result = _job(path, [[_cols(x=[2])]], job_id="job2")
    assert result["delta_version"] == 1
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table()["x"].to_pylist()) == [1, 2]  # readable: no file deleted


def test_two_sinks_of_one_job_on_one_table_both_commit(tmp_path) -> None:
    path = str(tmp_path / "t")
    for values in ([1, 2], [3, 4]):
        sink = DeltaSink(path)
        coord = DeltaSinkCoordinator(sink, FixedCoordinatorContext("same-job", "DeltaSink", 1))
        _write(sink, coord, 0, 1, [_cols(x=values)])
        coord.on_job_finished()
        coord.close()
    assert sorted(deltalake.DeltaTable(path).to_pyarrow_table()["x"].to_pylist()) == [1, 2, 3, 4]


def test_subtasks_with_different_schemas_are_refused_and_nothing_is_left(tmp_path) -> None:
    path = str(tmp_path / "t")
    with pytest.raises(StorageError, match="different schemas"):
        _job(path, [[_cols(x=[1])], [_cols(x=["oops"])]])
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    assert _files_on_disk(path) == []


def test_append_with_another_schema_is_refused_and_the_table_untouched(tmp_path) -> None:
    path = str(tmp_path / "t")
    _job(path, [[_cols(x=[1])]])
    with pytest.raises(StorageError, match="refused, the table is untouched.*'x'"):
        _job(path, [[_cols(x=["a"], z=[1.5])]], job_id="job2")
    t = deltalake.DeltaTable(path)
    assert t.version() == 0 and t.to_pyarrow_table()["x"].to_pylist() == [1]
    assert len(_files_on_disk(path)) == 1


def test_replayed_commit_deletes_its_files_and_reports_nothing_written(tmp_path) -> None:
    path = str(tmp_path / "t")
    _job(path, [[_cols(x=[1])]], sink=DeltaSink(path, app_id="load", app_version=3))
    result = _job(path, [[_cols(x=[1])]], sink=DeltaSink(path, app_id="load", app_version=3), job_id="job2")
    assert result["delta_records"] == 0 and result["delta_commit_skipped"] is True
    assert len(_files_on_disk(path)) == 1 and deltalake.DeltaTable(path).version() == 0


def test_overwrite_without_data_empties_the_table(tmp_path) -> None:
    path = str(tmp_path / "t")
    _job(path, [[_cols(x=[1, 2])]])
    result = _job(path, [[]], mode="overwrite", job_id="job2")
    assert result["delta_version"] == 1
    assert deltalake.DeltaTable(path).to_pyarrow_table().num_rows == 0


def test_nanosecond_timestamps_are_stored_as_microseconds(tmp_path) -> None:
    path = str(tmp_path / "t")
    ts = np.array(["2026-01-01T00:00:00.000001001"], dtype="datetime64[ns]")
    _job(path, [[_cols(t=ts)]])
    declared = str(tmp_path / "d")
    _job(declared, [[_cols(t=ts)]], sink=DeltaSink(declared, schema=pa.schema([("t", pa.timestamp("ns"))])))
    for p in (path, declared):
        got = deltalake.DeltaTable(p).to_pyarrow_table()["t"]
        assert got.type.unit == "us" and got.to_pylist()[0].microsecond == 1


def test_a_file_whose_writer_cannot_start_is_still_cleaned_up(tmp_path) -> None:
    import pyarrow.parquet as pq

    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = DeltaSinkCoordinator(sink, FixedCoordinatorContext("job", "sink", 1))
    writer = sink.create_writer()
    with mock.patch.object(pq, "ParquetWriter", side_effect=OSError(28, "No space left on device")):
        with pytest.raises(OSError):
            run_one_input(writer, [_cols(x=[1])], gateway=FakeEventGateway(coordinator=coord, subtask=0, attempt=0))
    writer.close()  # what the task does after a failure
    coord.close()
    assert _files_on_disk(path) == []
