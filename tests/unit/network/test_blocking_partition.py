"""Blocking exchanges: a producer's subpartitions written to files, committed to Delta, read back by channels."""
from __future__ import annotations

import os

import numpy as np
import pytest

from runtime.core.records import END_OF_PARTITION, ColumnBatch, ObjectBatch, Watermark
from runtime.rpc.deployment import BlockingFileSlice
from runtime.storage.blocking_results import commit_partition, committed_files, delete_files, remove_job_results
from runtime.taskmanager.network.blocking import BlockingInputChannel, BlockingResultPartition
from runtime.taskmanager.network.input import InputGate
from runtime.taskmanager.network.partition import ResultPartitionID

pytestmark = pytest.mark.unit


def _drain(gate: InputGate) -> dict[int, list]:
    out: dict[int, list] = {}
    while (got := gate.poll_next(1.0)) is not None:
        out.setdefault(got[0], []).append(got[1])
    return out


def _values(elements: list) -> list:
    vals = []
    for e in elements:
        if isinstance(e, ObjectBatch):
            vals.extend(e.values)
        elif isinstance(e, ColumnBatch):
            vals.extend(e.columns["x"].tolist())
        elif isinstance(e, Watermark):
            vals.append(("wm", e.timestamp))
    return vals


def test_written_subpartitions_are_read_back_in_order_with_their_watermarks(tmp_path):
    table = str(tmp_path / "job" / "ds1")
    p = BlockingResultPartition("ds1:0", "ds1", 3, "att0", table, producer_subtask=0)
    p.add(0, ObjectBatch([("a", 1), ("b", 2)]))
    p.add(2, ColumnBatch({"x": np.arange(5)}))
    p.add(0, ObjectBatch([("c", 3)]))
    p.broadcast(Watermark(5))  # only each subpartition's last watermark is kept, after its records
    p.broadcast(Watermark(2**63 - 1))
    p.add(1, END_OF_PARTITION)  # not stored: a channel ends with its files
    p.finish()
    produced = p.produced()
    (f,) = produced.files  # one file per producer, a row group per subpartition
    assert sorted(f.row_groups) == [0, 1, 2] and f.rows == 2 + 1 + 1 + 1 + 1  # two batches into 0, one into 2, a watermark each
    assert commit_partition(table, 0, produced.files) is True
    assert commit_partition(table, 0, produced.files) is False  # a replay adds nothing
    assert committed_files(table, 0) == produced.files  # rebuilt from the table and the file's footer

    gate = InputGate("test")
    gate.set_channels([
        BlockingInputChannel(gate, i, ResultPartitionID("ds1:0", "att0"), i, table, [BlockingFileSlice(path=f.path, row_groups=f.row_groups[i])])
        for i in range(3)
    ])
    gate.request_partitions()
    got = _drain(gate)
    assert gate.is_finished
    assert _values(got[0]) == [("a", 1), ("b", 2), ("c", 3), ("wm", 2**63 - 1)]
    assert _values(got[1]) == [("wm", 2**63 - 1)]
    assert _values(got[2]) == [0, 1, 2, 3, 4, ("wm", 2**63 - 1)]
    assert all(els[-1] is END_OF_PARTITION for els in got.values())


def test_many_batches_span_row_groups_and_keep_their_order(tmp_path, monkeypatch):
    import runtime.storage.blocking_results as br

    monkeypatch.setattr(br, "_ROW_GROUP_BYTES", 4096)  # many small row groups
    table = str(tmp_path / "r")
    p = BlockingResultPartition("r:1", "r", 2, "att", table, producer_subtask=1)
    for i in range(500):
        p.add(i % 2, ObjectBatch([(i, "x" * 50)]))
    p.finish()
    (f,) = p.produced().files
    assert len(f.row_groups[1]) > 1  # many row groups of subpartition 1, interleaved with 0's
    gate = InputGate("g")
    gate.set_channels([BlockingInputChannel(gate, 0, ResultPartitionID("r:1", "att"), 1, table, [BlockingFileSlice(path=f.path, row_groups=f.row_groups[1])])])
    gate.request_partitions()
    assert [v[0] for v in _values(_drain(gate)[0])] == list(range(1, 500, 2))


def test_a_released_producer_leaves_no_files(tmp_path):
    table = str(tmp_path / "r")
    p = BlockingResultPartition("r:0", "r", 2, "att", table, producer_subtask=0)
    p.add(0, ObjectBatch(list(range(10000))))
    p.add(1, ObjectBatch(list(range(10))))
    p.release(RuntimeError("cancelled"))
    leftovers = [f for _, _, fs in os.walk(tmp_path) for f in fs]
    assert leftovers == []
    with pytest.raises(Exception, match="released"):
        p.add(0, ObjectBatch([1]))


def test_orphans_and_whole_job_results_are_removed(tmp_path):
    job_dir = str(tmp_path / "job")
    table = f"{job_dir}/r"
    p = BlockingResultPartition("r:0", "r", 1, "att", table, producer_subtask=0)
    p.add(0, ObjectBatch([1, 2]))
    p.finish()
    files = p.produced().files
    delete_files(table, [f.path for f in files])
    assert not any(f.endswith(".parquet") for _, _, fs in os.walk(job_dir) for f in fs)
    remove_job_results(job_dir)
    assert not os.path.exists(job_dir)
