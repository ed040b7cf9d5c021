from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest

from runtime.api.common import Types
from runtime.api.connectors.delta import DeltaSink, DeltaSinkCoordinator
from runtime.core.errors import StorageError
from runtime.core.operators import FixedCoordinatorContext
from runtime.core.records import ColumnBatch
from runtime.core.row import Row
from runtime.storage.delta_commit import CommitResult, commit_add_files
from tests.harness import FakeEventGateway, obj, open_operator, run_one_input

pytestmark = pytest.mark.unit

deltalake = pytest.importorskip("deltalake")


def _write(sink: DeltaSink, coord, subtask: int, parallelism: int, batches, attempt: int = 0):
    gw = FakeEventGateway(coordinator=coord, subtask=subtask, attempt=attempt)
    run_one_input(sink.create_writer(), batches, subtask=subtask, parallelism=parallelism, attempt=attempt, gateway=gw)


def _read(path: str) -> list[dict]:
    t = deltalake.DeltaTable(path).to_pyarrow_table()
    return sorted(t.to_pylist(), key=lambda r: tuple(str(v) for v in r.values()))


def test_two_subtasks_one_commit_columns_and_rows(tmp_path):
    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job-a", "DeltaSink", 2))
    _write(sink, coord, 0, 2, [ColumnBatch({"id": np.array([1, 2]), "name": np.array(["a", "b"], dtype=object)})])
    _write(sink, coord, 1, 2, [obj([Row(id=3, name="c"), {"id": 4, "name": "d"}])])
    assert not os.path.exists(os.path.join(path, "_delta_log"))  # nothing visible before the commit
    meta = coord.on_job_finished()
    assert meta["delta_version"] == 0 and meta["delta_files"] == 2 and meta["delta_records"] == 4
    assert _read(path) == [{"id": i, "name": n} for i, n in [(1, "a"), (2, "b"), (3, "c"), (4, "d")]]
    # a second job appends in one more version
    coord2 = sink.coordinator_provider().create(FixedCoordinatorContext("job-b", "DeltaSink", 1))
    _write(sink, coord2, 0, 1, [obj([Row(id=5, name="e")])])
    assert coord2.on_job_finished()["delta_version"] == 1
    assert len(_read(path)) == 5


def test_replay_of_same_app_id_and_version_commits_nothing_twice(tmp_path):
    path = str(tmp_path / "t")
    sink = DeltaSink(path, app_id="daily-load", app_version=7)
    for _ in range(2):  # e.g. a retried run of the same partition
        coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1))
        _write(sink, coord, 0, 1, [obj([Row(x=1), Row(x=2)])])
        assert coord.on_job_finished()["delta_version"] == 0
        coord.close()
    assert _read(path) == [{"x": 1}, {"x": 2}]
    assert deltalake.DeltaTable(path).transaction_version("daily-load") == 7


def test_commit_add_files_idempotent_directly(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "t"
    path.mkdir()
    pq.write_table(pa.table({"v": [1, 2, 3]}), path / "f1.parquet")
    files = [{"path": "f1.parquet", "size": (path / "f1.parquet").stat().st_size, "num_records": 3}]
    schema = pa.schema([("v", pa.int64())])
    assert commit_add_files(str(path), files, schema, app_id="app", version=1) == CommitResult(0, True)
    assert commit_add_files(str(path), files, schema, app_id="app", version=1) == CommitResult(0, False)  # skipped
    pq.write_table(pa.table({"v": [4]}), path / "f2.parquet")
    files2 = [{"path": "f2.parquet", "size": (path / "f2.parquet").stat().st_size, "num_records": 1}]
    assert commit_add_files(str(path), files2, schema, app_id="app", version=2) == CommitResult(1, True)
    assert sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table()["v"].to_pylist()) == [1, 2, 3, 4]
    with pytest.raises(StorageError):
        commit_add_files(str(path), files2, schema, mode="upsert")


def test_failed_job_leaves_no_commit_and_no_files(tmp_path):
    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 2))
    _write(sink, coord, 0, 2, [obj([Row(x=1)])])
    # subtask 1 fails mid-way: its writer closes without reporting and removes its own file
    w = sink.create_writer()
    open_operator(w, subtask=1, parallelism=2, gateway=FakeEventGateway(coordinator=coord, subtask=1))
    w.process_batch(obj([Row(x=2)]))
    w.close()
    coord.close()  # job did not finish: the reported file of subtask 0 is removed too
    assert not os.path.exists(os.path.join(path, "_delta_log"))
    assert [f for f in os.listdir(path) if f.endswith(".parquet")] == []


def test_missing_subtask_report_refuses_partial_commit(tmp_path):
    sink = DeltaSink(str(tmp_path / "t"))
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 2))
    _write(sink, coord, 0, 2, [obj([Row(x=1)])])
    with pytest.raises(StorageError, match="subtask"):
        coord.on_job_finished()


def test_restarted_attempt_supersedes_old_files(tmp_path):
    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1))
    _write(sink, coord, 0, 1, [obj([Row(x=1)])], attempt=0)
    _write(sink, coord, 0, 1, [obj([Row(x=1)])], attempt=1)
    coord.on_job_finished()
    assert _read(path) == [{"x": 1}]
    assert len([f for f in os.listdir(path) if f.endswith(".parquet")]) == 1  # old attempt's file deleted


@pytest.mark.parametrize("winner", [0, 1], ids=["original-wins", "speculative-wins"])
def test_only_the_winning_attempts_files_are_committed_when_attempts_run_at_once(tmp_path, winner):
    """Speculative execution: both attempts of subtask 0 reported their files; the scheduler discards
    the loser (whichever attempt number it has), and a report arriving after that is discarded too."""
    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 2))
    assert coord.supports_concurrent_execution_attempts
    _write(sink, coord, 0, 2, [obj([Row(x=1, attempt=0)])], attempt=0)
    _write(sink, coord, 0, 2, [obj([Row(x=1, attempt=1)])], attempt=1)
    coord.execution_attempt_failed(0, 1 - winner)
    _write(sink, coord, 1, 2, [obj([Row(x=2, attempt=winner)])], attempt=winner)
    coord.execution_attempt_failed(1, 1 - winner)
    _write(sink, coord, 1, 2, [obj([Row(x=2, attempt=1 - winner)])], attempt=1 - winner)  # after it lost
    coord.on_job_finished()
    assert _read(path) == [{"x": 1, "attempt": winner}, {"x": 2, "attempt": winner}]
    assert len([f for f in os.listdir(path) if f.endswith(".parquet")]) == 2  # the losers' files deleted


def test_partitioned_rolling_overwrite_and_schema(tmp_path):
    path = str(tmp_path / "t")
    schema = Types.ROW_NAMED(["day", "v"], [Types.STRING(), Types.LONG()])
    sink = DeltaSink(path, schema=schema, partition_by="day", target_file_size=1)  # roll after every write
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1))
    _write(sink, coord, 0, 1, [obj([("d1", 1), ("d2", 2)]), obj([("d1", 3)])])
    meta = coord.on_job_finished()
    assert meta["delta_files"] == 3
    dt = deltalake.DeltaTable(path)
    assert dt.metadata().partition_columns == ["day"]
    assert _read(path) == [{"day": "d1", "v": 1}, {"day": "d1", "v": 3}, {"day": "d2", "v": 2}]
    # overwrite replaces everything in one new version
    sink2 = DeltaSink(path, schema=schema, partition_by=["day"], mode="overwrite")
    coord2 = sink2.coordinator_provider().create(FixedCoordinatorContext("job2", "DeltaSink", 1))
    _write(sink2, coord2, 0, 1, [obj([("d3", 9)])])
    assert coord2.on_job_finished()["delta_version"] == 1
    assert _read(path) == [{"day": "d3", "v": 9}]


def test_no_data_no_schema_commits_nothing(tmp_path):
    sink = DeltaSink(str(tmp_path / "t"))
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1))
    _write(sink, coord, 0, 1, [])
    assert coord.on_job_finished()["delta_version"] is None


def test_sink_validation(tmp_path):
    from runtime.core.errors import InvalidProgramError

    with pytest.raises(InvalidProgramError):
        DeltaSink(str(tmp_path), mode="merge")
    with pytest.raises(InvalidProgramError):
        DeltaSink(str(tmp_path), schema=Types.LIST(Types.INT()))
    sink = DeltaSink.for_path(str(tmp_path / "t"))
    w = sink.create_writer()
    open_operator(w, gateway=FakeEventGateway(coordinator=DeltaSinkCoordinator(sink, FixedCoordinatorContext("j", "s", 1))))
    with pytest.raises(InvalidProgramError, match="named Rows or dicts"):
        w.process_batch(obj([1, 2]))


def _ids(path: str) -> list[int]:
    return sorted(r["id"] for r in _read(path))


def test_files_of_an_aborted_checkpoint_go_with_the_next_one_and_nothing_is_committed_twice(tmp_path):
    import cloudpickle

    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = DeltaSinkCoordinator(sink, FixedCoordinatorContext("job", "sink", 1))
    w = sink.create_writer()
    open_operator(w, gateway=FakeEventGateway(coordinator=coord))
    w.process_batch(obj([{"id": 1}, {"id": 2}]))
    c1 = w.snapshot_state(1).committables  # checkpoint 1 is aborted: never committed
    w.process_batch(obj([{"id": 3}]))
    c2 = w.snapshot_state(2).committables  # carries checkpoint 1's files too
    assert sum(len(c["files"]) for c in c2) == 2
    coord.notify_checkpoint_complete(2, [cloudpickle.loads(cloudpickle.dumps(c2))])
    assert _ids(path) == [1, 2, 3]
    # the writer did not hear of checkpoint 2 yet: checkpoint 3 offers its files again; never added twice
    w.process_batch(obj([{"id": 4}]))
    c3 = w.snapshot_state(3).committables
    coord.notify_checkpoint_complete(3, [c3])
    assert _ids(path) == [1, 2, 3, 4]
    w.notify_checkpoint_complete(3)
    w.process_batch(obj([{"id": 5}]))
    w.end_input()  # the tail: only what no checkpoint holds
    coord.on_job_finished()
    coord.close()
    assert _ids(path) == [1, 2, 3, 4, 5]
    assert c1 and all(os.path.exists(os.path.join(path, f["path"])) for c in c3 for f in c["files"])


def test_a_restore_never_commits_a_file_the_table_already_has(tmp_path):
    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = DeltaSinkCoordinator(sink, FixedCoordinatorContext("job", "sink", 1))
    w = sink.create_writer()
    open_operator(w, gateway=FakeEventGateway(coordinator=coord))
    w.process_batch(obj([{"id": 1}]))
    c1 = w.snapshot_state(1).committables
    coord.notify_checkpoint_complete(1, [c1])
    w.process_batch(obj([{"id": 2}]))
    c2 = w.snapshot_state(2).committables  # includes checkpoint 1's file (no notification yet)
    # the JobManager fails over after checkpoint 2 completed but before its sink commit: a new coordinator restores
    fresh = DeltaSinkCoordinator(sink, FixedCoordinatorContext("job", "sink", 1))
    fresh.reset_to_checkpoint(2, [c2], None)
    assert _ids(path) == [1, 2]


def _day_writer(sink: DeltaSink, coord: DeltaSinkCoordinator, job_id: str):
    w = sink.create_writer()
    open_operator(w, gateway=FakeEventGateway(coordinator=coord), job_id=job_id)
    return w


def _days(path: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for r in _read(path):
        out.setdefault(r["day"], []).append(r["v"])
    return out


def test_replace_where_replaces_its_partitions_once_per_output_lineage(tmp_path):
    path = str(tmp_path / "t")
    schema = Types.ROW_NAMED(["day", "v"], [Types.STRING(), Types.LONG()])
    day1 = DeltaSink(path, schema=schema, mode="overwrite", partition_by="day", replace_where={"day": "d1"})
    c1 = DeltaSinkCoordinator(day1, FixedCoordinatorContext("job-1", "sink", 1))
    w1 = _day_writer(day1, c1, "job-1")
    w1.process_batch(obj([("d1", 1), ("d1", 2)]))
    with pytest.raises(Exception, match="outside replace_where"):
        w1.process_batch(obj([("d2", 3)]))
    saved = w1.snapshot_state(7).committables  # e.g. day 1's final savepoint
    c1.notify_checkpoint_complete(7, [saved])
    assert _days(path) == {"d1": [1, 2]}

    # day 2, restored from day 1's savepoint: day 1's files are not added again (job-1 committed
    # them), day 2 is replaced (its first commit), day 1 stays
    day2 = DeltaSink(path, schema=schema, mode="overwrite", partition_by="day", replace_where={"day": "d2"})
    for run in range(2):  # a re-run of day 2 from the same savepoint replaces day 2's rows again
        c2 = DeltaSinkCoordinator(day2, FixedCoordinatorContext(f"job-2-{run}", "sink", 1))
        c2.reset_to_checkpoint(7, [saved], None)
        w2 = _day_writer(day2, c2, f"job-2-{run}")
        w2.process_batch(obj([("d2", 10 + run)]))
        own = w2.snapshot_state(8).committables
        c2.notify_checkpoint_complete(8, [own])
        assert _days(path) == {"d1": [1, 2], "d2": [10 + run]}
    # a failover of that day-2 job restores its own checkpoint: its output goes on, nothing is replaced
    w2.process_batch(obj([("d2", 20)]))
    tail = w2.snapshot_state(9).committables
    c3 = DeltaSinkCoordinator(day2, FixedCoordinatorContext("job-2-1", "sink", 1))
    c3.reset_to_checkpoint(9, [tail], None)
    assert _days(path) == {"d1": [1, 2], "d2": [11, 20]}
    w3 = _day_writer(day2, c3, "job-2-1")
    w3.process_batch(obj([("d2", 21)]))
    c3.notify_checkpoint_complete(10, [w3.snapshot_state(10).committables])
    assert _days(path) == {"d1": [1, 2], "d2": [11, 20, 21]}


def test_replace_where_needs_overwrite_and_partition_columns(tmp_path):
    for kwargs in ({"mode": "append", "partition_by": "day"}, {"mode": "overwrite", "partition_by": "other"}, {"mode": "overwrite"}):
        with pytest.raises(Exception, match="replace_where"):
            DeltaSink(str(tmp_path / "t"), replace_where={"day": "d1"}, **kwargs)


def test_the_sink_refuses_a_directory_that_holds_something_else_than_a_delta_table(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    coord = DeltaSink(str(folder)).coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1))
    with pytest.raises(StorageError, match=r"not empty and not a Delta table \(it holds notes.txt\); nothing was written"):
        coord.start()
    assert sorted(os.listdir(folder)) == ["notes.txt"] and (folder / "notes.txt").read_text() == "keep me"
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(StorageError, match="is a file"):
        DeltaSink(str(tmp_path / "a-file")).coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1)).start()
    # missing, empty, or a Delta table: fine
    (tmp_path / "empty").mkdir()
    for ok in (tmp_path / "new", tmp_path / "empty"):
        DeltaSink(str(ok)).coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1)).start()
    table = str(tmp_path / "table")
    sink = DeltaSink(table)
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 1))
    _write(sink, coord, 0, 1, [obj([Row(x=1)])])
    coord.on_job_finished()
    DeltaSink(table).coordinator_provider().create(FixedCoordinatorContext("job2", "DeltaSink", 1)).start()


def test_a_failed_job_without_checkpoints_leaves_no_file_of_a_writer_that_died_unreported(tmp_path):
    """A TaskManager killed mid-write: its writer never closes nor reports. The coordinator finds
    the sink's files no commit references and deletes them; a new table's folder goes too."""
    path = str(tmp_path / "new-table")
    sink = DeltaSink(path, target_file_size=1)  # roll after every batch: files on disk at once
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job", "DeltaSink", 2))
    coord.start()
    dead = sink.create_writer()
    open_operator(dead, subtask=1, parallelism=2, gateway=FakeEventGateway(coordinator=coord, subtask=1))
    dead.process_batch(obj([Row(x=2)]))
    dead.process_batch(obj([Row(x=3)]))  # ... and the process is gone: no close(), no report
    assert [f for f in os.listdir(path) if f.endswith(".parquet")]
    coord.close()
    assert not os.path.exists(path)
    # an existing folder (here: an existing table) stays; only this job's unreferenced files go
    existing = str(tmp_path / "table")
    first = DeltaSink(existing)
    c1 = first.coordinator_provider().create(FixedCoordinatorContext("job-1", "DeltaSink", 1))
    c1.start()
    _write(first, c1, 0, 1, [obj([Row(x=1)])])
    c1.on_job_finished()
    second = DeltaSink(existing, target_file_size=1)
    c2 = second.coordinator_provider().create(FixedCoordinatorContext("job-2", "DeltaSink", 1))
    c2.start()
    w = second.create_writer()
    open_operator(w, subtask=0, parallelism=1, gateway=FakeEventGateway(coordinator=c2, subtask=0))
    w.process_batch(obj([Row(x=9)]))
    c2.close()
    assert _read(existing) == [{"x": 1}]
    assert len([f for f in os.listdir(existing) if f.endswith(".parquet")]) == 1


def test_a_second_job_on_the_same_table_is_refused_at_start_until_the_first_ends(tmp_path):
    from runtime.core.errors import TableInUseError
    from runtime.storage.table_lease import read_lease

    path = str(tmp_path / "t")
    first = DeltaSink(path, mode="overwrite")
    c1 = first.coordinator_provider().create(FixedCoordinatorContext("job-1", "delta: out", 1))
    c1.start()
    second = DeltaSink(path)
    refused = rf"job job-2: Delta sink 'delta: other' cannot write {path}: another running job writes it \(job job-1, sink 'delta: out'"
    with pytest.raises(TableInUseError, match=refused):
        second.coordinator_provider().create(FixedCoordinatorContext("job-2", "delta: other", 1)).start()
    _write(first, c1, 0, 1, [obj([Row(x=1)])])
    c1.on_job_finished()  # the last commit released the table
    assert read_lease(path)["holders"] == {}
    c2 = second.coordinator_provider().create(FixedCoordinatorContext("job-2", "delta: other", 1))
    c2.start()
    _write(second, c2, 0, 1, [obj([Row(x=2)])])
    c2.on_job_finished()
    c2.close()
    assert _read(path) == [{"x": 1}, {"x": 2}]


def test_sinks_that_allow_concurrent_writers_append_side_by_side_and_overwrite_is_refused_with_it(tmp_path):
    from runtime.core.errors import InvalidProgramError, TableInUseError

    path = str(tmp_path / "t")
    with pytest.raises(InvalidProgramError, match="allow_concurrent_writers=True .* may only append: mode='overwrite'"):
        DeltaSink.for_path(path, mode="overwrite", allow_concurrent_writers=True)
    sinks = [DeltaSink.for_path(path, mode="append", allow_concurrent_writers=True) for _ in range(2)]
    coords = [s.coordinator_provider().create(FixedCoordinatorContext(f"job-{i}", "out", 1)) for i, s in enumerate(sinks)]
    for c in coords:
        c.start()
    with pytest.raises(TableInUseError, match="the other job does not allow|job job-0"):
        DeltaSink(path).coordinator_provider().create(FixedCoordinatorContext("job-x", "out", 1)).start()  # an exclusive sink waits for both
    for i, (s, c) in enumerate(zip(sinks, coords)):
        _write(s, c, 0, 1, [obj([Row(x=i)])])
    for c in coords:
        c.on_job_finished()
        c.close()
    assert _read(path) == [{"x": 0}, {"x": 1}]


def test_a_sink_that_lost_its_lease_commits_nothing(tmp_path):
    from runtime.core.errors import TableLeaseLostError
    from runtime.storage.table_lease import LeaseRegister
    from runtime.storage.table_lease_rules import LeaseState

    path = str(tmp_path / "t")
    sink = DeltaSink(path)
    coord = sink.coordinator_provider().create(FixedCoordinatorContext("job-1", "out", 1))
    coord.start()
    # another job took the table over (this JobManager did not renew in time)
    register = LeaseRegister(path)
    register.transition(lambda state: LeaseState(generation=state.generation + 1, holders={}))
    _write(sink, coord, 0, 1, [obj([Row(x=1)])])
    with pytest.raises(TableLeaseLostError, match="lost its lease"):
        coord.on_job_finished()
    coord.close()
    assert not os.path.exists(os.path.join(path, "_delta_log"))
