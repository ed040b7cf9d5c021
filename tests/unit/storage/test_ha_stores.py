"""The JobManager HA stores in Delta: job graphs (DefaultJobGraphStore) and job results (FLIP-194)."""
from __future__ import annotations

import glob
import json
import os
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from runtime.core.errors import CorruptHaEntryError, HaEntryNotFoundError, HaStoreError
from runtime.core.states import JobStatus
from runtime.storage.ha_stores import JobGraphStore, JobResultEntry, JobResultStore

pytestmark = pytest.mark.unit

CLUSTER = "/default"  # Flink's default high-availability.cluster-id
A, B, C = "a" * 32, "b" * 32, "c" * 32


def graph(job_id: str, n: int = 0) -> str:
    return json.dumps({"job_id": job_id, "name": f"job {job_id[:4]}", "vertices": [{"id": i} for i in range(n)]})


def graph_files(store: JobGraphStore, job_id: str | None = None) -> list[str]:
    return sorted(glob.glob(f"{store.table_uri}/_graphs/{job_id or ''}*.json"))


def version(uri: str) -> int:
    return DeltaTable(uri).version()


# --- JobGraphStore --------------------------------------------------------------------------------
def test_put_get_remove_round_trip_in_the_cluster_folder(tmp_path: Path) -> None:
    store = JobGraphStore(str(tmp_path), CLUSTER)
    assert store.table_uri == f"{tmp_path}/default/job_graphs"
    assert store.job_ids() == [] and not os.path.exists(store.table_uri)  # reading creates nothing
    big = graph(A, 100_000)  # a couple of MB
    assert len(big) > 1_000_000
    store.put(A, big, submitted_at_ms=1000)
    assert store.job_ids() == [A] and store.get(A) == big
    assert len(graph_files(store, A)) == 1
    before = version(store.table_uri)
    store.remove(A)
    assert version(store.table_uri) == before + 1  # the row goes in one commit
    assert store.job_ids() == [] and graph_files(store) == []
    with pytest.raises(HaEntryNotFoundError, match=f"job {A}: no job graph"):
        store.get(A)
    store.remove(A)  # absent: a no-op, no commit
    assert version(store.table_uri) == before + 1


def test_put_of_a_present_job_replaces_its_entry_in_one_commit(tmp_path: Path) -> None:
    store = JobGraphStore(str(tmp_path), CLUSTER)
    store.put(A, graph(A, 1), 1000)
    store.put(B, graph(B), 2000)
    (old,) = graph_files(store, A)
    before = version(store.table_uri)
    store.put(A, graph(A, 2), 3000)  # e.g. rescaled
    assert version(store.table_uri) == before + 1
    assert store.get(A) == graph(A, 2) and store.get(B) == graph(B)
    assert store.job_ids() == [B, A]  # one row each, A now submitted later
    assert DeltaTable(store.table_uri).to_pyarrow_table().num_rows == 2
    assert graph_files(store, A) != [old] and not os.path.exists(old)  # the replaced file is deleted


def test_job_ids_are_in_submission_order(tmp_path: Path) -> None:
    store = JobGraphStore(str(tmp_path), CLUSTER)
    for job_id, at in ((C, 300), (A, 100), (B, 200)):
        store.put(job_id, graph(job_id), at)
    assert store.job_ids() == [A, B, C]


@pytest.mark.parametrize("damage", ["truncated", "deleted", "overwritten"])
def test_a_damaged_graph_file_names_job_and_file_and_other_jobs_stay_readable(tmp_path: Path, damage: str) -> None:
    store = JobGraphStore(str(tmp_path), CLUSTER)
    store.put(A, graph(A, 100), 1)
    store.put(B, graph(B, 100), 2)
    (path,) = graph_files(store, A)
    data = Path(path).read_bytes()
    if damage == "truncated":
        Path(path).write_bytes(data[: len(data) // 2])
    elif damage == "deleted":
        os.remove(path)
    else:  # same size, different bytes
        Path(path).write_bytes(data.replace(b"vertices", b"VERTICES"))
    with pytest.raises(CorruptHaEntryError) as err:
        store.get(A)
    assert A in str(err.value) and path in str(err.value)
    assert {"truncated": "truncated", "deleted": "missing", "overwritten": "sha256"}[damage] in str(err.value)
    assert store.get(B) == graph(B, 100) and store.job_ids() == [A, B]
    store.remove(A)  # the way out the message names
    assert store.job_ids() == [B]


def test_invalid_job_ids_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    store = JobGraphStore(str(tmp_path), CLUSTER)
    for bad in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(HaStoreError, match="cannot be stored"):
            store.put(bad, "{}", 1)
    assert not os.path.exists(store.table_uri)


# --- JobResultStore -------------------------------------------------------------------------------
def test_job_result_dirty_then_clean(tmp_path: Path) -> None:
    now = iter(range(1000, 2000, 10))
    store = JobResultStore(str(tmp_path), CLUSTER, clock=lambda: next(now))
    assert store.table_uri == f"{tmp_path}/default/job_results"
    assert store.get(A) is None and not store.has_result(A) and store.dirty_results() == [] and store.clean_results() == []
    store.create_dirty(A, "FINISHED", '{"accumulators": {}}')
    store.create_dirty(B, JobStatus.CANCELED, "{}")
    assert store.has_result(A) and store.has_result(B) and not store.has_result(C)
    assert store.get(A) == JobResultEntry(job_id=A, status="FINISHED", result_json='{"accumulators": {}}', clean=False, created_at_ms=1000)
    assert [e.job_id for e in store.dirty_results()] == [A, B]
    before = version(store.table_uri)
    store.mark_clean(A)
    assert version(store.table_uri) == before + 1  # dirty -> clean in one commit
    assert [e.job_id for e in store.dirty_results()] == [B]
    assert store.clean_results() == [JobResultEntry(job_id=A, status="FINISHED", result_json='{"accumulators": {}}', clean=True, created_at_ms=1000)]
    assert store.has_result(A)  # a clean job still never runs again
    store.mark_clean(A)  # already clean: nothing to do
    assert version(store.table_uri) == before + 1
    with pytest.raises(HaEntryNotFoundError, match=f"job {C}: cannot mark"):
        store.mark_clean(C)


def test_create_dirty_is_idempotent_and_keeps_the_first_entry(tmp_path: Path) -> None:
    store = JobResultStore(str(tmp_path), CLUSTER, clock=lambda: 5)
    store.create_dirty(A, "FAILED", '{"error": "first"}')
    v = version(store.table_uri)
    JobResultStore(str(tmp_path), CLUSTER, clock=lambda: 9).create_dirty(A, "FINISHED", '{"second": true}')
    assert version(store.table_uri) == v  # nothing committed
    assert store.get(A) == JobResultEntry(job_id=A, status="FAILED", result_json='{"error": "first"}', clean=False, created_at_ms=5)
    store.mark_clean(A)
    store.create_dirty(A, "FINISHED", "{}")  # after cleanup too
    entry = store.get(A)
    assert entry is not None and entry.clean and entry.status == "FAILED"


def test_a_result_status_must_be_globally_terminal(tmp_path: Path) -> None:
    store = JobResultStore(str(tmp_path), CLUSTER)
    with pytest.raises(HaStoreError, match=r"status: Value error, a job result's status is one of FINISHED, FAILED, CANCELED, got 'RUNNING'"):
        store.create_dirty(A, "RUNNING", "{}")
    assert not store.has_result(A)


# --- both: tables, several JobManagers, concurrency -----------------------------------------------
def test_two_jobmanagers_on_one_storage_dir_see_each_others_writes(tmp_path: Path) -> None:
    uri = tmp_path.as_uri()  # a URI, as for an object store
    graphs1, graphs2 = JobGraphStore(uri, CLUSTER), JobGraphStore(uri, CLUSTER)
    results1, results2 = JobResultStore(uri, CLUSTER), JobResultStore(uri, CLUSTER)
    graphs1.put(A, graph(A), 1)
    assert graphs2.job_ids() == [A] and graphs2.get(A) == graph(A)
    graphs2.put(B, graph(B), 2)
    graphs2.remove(A)
    assert graphs1.job_ids() == [B]
    results1.create_dirty(A, "FINISHED", "{}")
    assert results2.has_result(A)
    results2.mark_clean(A)
    assert [e.job_id for e in results1.clean_results()] == [A]
    assert os.path.isdir(tmp_path / "default" / "job_graphs" / "_delta_log")


def test_concurrent_puts_from_two_threads_all_land(tmp_path: Path) -> None:
    stores = [JobGraphStore(str(tmp_path), CLUSTER), JobGraphStore(str(tmp_path), CLUSTER)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        start.wait()
        try:
            for i in range(6):
                job_id = f"{n}{i:031d}"
                stores[n].put(job_id, graph(job_id, i), submitted_at_ms=10 * i + n)
            stores[n].put("shared", graph("shared", n), 0)  # the same id from both: one entry stays
        except BaseException as e:  # noqa: BLE001 - handed to the test thread, asserted below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    ids = stores[0].job_ids()
    assert sorted(ids) == sorted(["shared"] + [f"{n}{i:031d}" for n in (0, 1) for i in range(6)])
    for job_id in ids:
        if job_id != "shared":
            assert stores[1].get(job_id) == graph(job_id, int(job_id[-1]))
    assert stores[0].get("shared") in (graph("shared", 0), graph("shared", 1))
    assert DeltaTable(stores[0].table_uri).to_pyarrow_table().num_rows == len(ids)
    assert len(graph_files(stores[0])) == len(ids)  # replaced files deleted, none orphaned


def test_a_commit_that_conflicts_is_reread_and_reapplied(tmp_path: Path) -> None:
    """Another JobManager commits between this one's read and its commit: both changes land."""
    mine, other = JobGraphStore(str(tmp_path), CLUSTER), JobGraphStore(str(tmp_path), CLUSTER)
    mine.put(A, graph(A), 1)
    original = mine._table.snapshot
    reads: list[int] = []

    def snapshot_then_interleave(job_id: str | None = None) -> Any:
        snap = original(job_id)
        reads.append(1)
        if len(reads) == 1:  # the other JobManager commits after our snapshot
            other.put(B, graph(B), 2)
        return snap

    mine._table.snapshot = snapshot_then_interleave  # type: ignore[method-assign]  # test double around the read
    mine.put(C, graph(C), 3)
    assert len(reads) >= 2  # re-read after the conflict
    assert other.job_ids() == [A, B, C]


def test_a_result_created_between_read_and_commit_is_the_one_kept(tmp_path: Path) -> None:
    """Two JobManagers create the same job's result; the other commits after this one read: the
    other's entry is the first, so it stays, and the table holds one row for the job."""
    mine, other = JobResultStore(str(tmp_path), CLUSTER), JobResultStore(str(tmp_path), CLUSTER)
    mine.create_dirty(B, "FINISHED", "{}")  # the table exists
    original = mine._table.snapshot
    reads: list[int] = []

    def snapshot_then_interleave(job_id: str | None = None) -> Any:
        snap = original(job_id)
        reads.append(1)
        if len(reads) == 1:
            other.create_dirty(A, "CANCELED", '{"by": "other"}')
        return snap

    mine._table.snapshot = snapshot_then_interleave  # type: ignore[method-assign]  # test double around the read
    mine.create_dirty(A, "FINISHED", '{"by": "mine"}')
    entry = other.get(A)
    assert entry is not None and entry.status == "CANCELED" and entry.result_json == '{"by": "other"}'
    assert DeltaTable(mine.table_uri).to_pyarrow_table().num_rows == 2  # A once, B once


def test_concurrent_create_dirty_of_one_job_keeps_one_entry(tmp_path: Path) -> None:
    stores = [JobResultStore(str(tmp_path), CLUSTER), JobResultStore(str(tmp_path), CLUSTER)]
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(n: int) -> None:
        start.wait()
        try:
            stores[n].create_dirty(A, ("FINISHED", "CANCELED")[n], json.dumps({"by": n}))
        except BaseException as e:  # noqa: BLE001 - handed to the test thread, asserted below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert DeltaTable(stores[0].table_uri).to_pyarrow_table().num_rows == 1
    entry = stores[1].get(A)
    assert entry is not None and (entry.status, json.loads(entry.result_json)["by"]) in (("FINISHED", 0), ("CANCELED", 1))


@pytest.mark.parametrize("which", ["job_graphs", "job_results"])
def test_a_corrupt_table_names_its_path(tmp_path: Path, which: str) -> None:
    graphs, results = JobGraphStore(str(tmp_path), CLUSTER), JobResultStore(str(tmp_path), CLUSTER)
    graphs.put(A, graph(A), 1)
    results.create_dirty(A, "FINISHED", "{}")
    table = tmp_path / "default" / which
    (table / "_delta_log" / f"{version(str(table)) + 1:020d}.json").write_text("garbage{")
    calls = [graphs.job_ids, lambda: graphs.get(A), lambda: graphs.put(B, "{}", 2)] if which == "job_graphs" else \
        [results.dirty_results, lambda: results.has_result(A), lambda: results.create_dirty(B, "FAILED", "{}")]
    for call in calls:
        with pytest.raises(HaStoreError, match=f"table {table} cannot be read"):
            call()


def test_a_delta_table_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    table = tmp_path / "default" / "job_results"
    write_deltalake(str(table), pa.table({"user_id": [1]}))
    with pytest.raises(HaStoreError, match=f"{table} is a Delta table but not a job result store"):
        JobResultStore(str(tmp_path), CLUSTER).dirty_results()
