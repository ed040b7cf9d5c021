"""The JobManager's high-availability stores in Delta: submitted job graphs and job results.

A JobManager that takes over leadership must know which jobs to run and which must never run
again; both live here, under `high-availability.storageDir`, so every JobManager of the cluster
(the leader and its standbys, on any host) reads the same state:

    <storage dir>/<cluster id>/job_graphs      Delta table: one row per submitted, not yet terminal job
    <storage dir>/<cluster id>/job_graphs/_graphs/<job id>-<uuid>.json   the job graph a row names
    <storage dir>/<cluster id>/job_results     Delta table: one row per terminated job (FLIP-194)

- `JobGraphStore` (Flink: DefaultJobGraphStore) holds the jobs that were submitted and have not
  reached a globally terminal state, so a new leader recovers and resumes each of them.
- `JobResultStore` (Flink: FileSystemJobResultStore, FLIP-194) records that a job terminated, so
  after a fail-over the job is never run twice: a job with a result is not recovered, even when its
  job graph is still in the JobGraphStore. An entry is *dirty* while the job's HA data (job graph,
  checkpoints, blocking results) still awaits cleanup and *clean* once that data was removed; a new
  leader finishes the cleanup of every dirty entry.

A job graph can be megabytes: it is written as a file first and then ONE Delta commit adds the
row that names it (with its size and sha256, so damage is detected on recovery instead of
running a wrong program). The file name carries a fresh uuid, so a file is never overwritten: a
replaced or removed job's old file is deleted after the commit that drops its row. Graph files
sit in `_graphs/` because Delta readers, Spark and VACUUM ignore `_`-prefixed folders: a plain
`graphs/` folder holds files no Delta log references, which a full VACUUM (Spark's, or delta-rs's
`full=True`) deletes once they are older than the retention period, i.e. every long-running job's.

Concurrency: several JobManagers (a new leader and a stale one that has not noticed yet, or two
threads) may write a store at once. Every change is a read-modify-write of one fresh snapshot and
its commit carries the store's app transaction (`millrace-ha-job_graphs`, version = the store's
previous version + 1): delta-rs refuses a commit when a concurrent commit of the same app id
landed after the snapshot ("Concurrent transaction failed"), so two changes never both apply to
the same snapshot. The refused change is re-read and re-applied (a few times, with jittered
back-off); an update is never silently lost. The app transaction version is also the store's
generation: it grows by one per change. Tables are created (empty) on the first write; reading a
table that does not exist yet reads an empty store.

Only storage/ imports deltalake; it is imported lazily so merely importing this module is cheap.
"""
from __future__ import annotations

import hashlib
import logging
import os
import random
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from runtime.core.errors import CorruptHaEntryError, HaEntryNotFoundError, HaStoreError
from runtime.core.states import JobStatus
from runtime.storage.delta_write import equals_predicate
from runtime.storage.state_files import resolve_filesystem

log = logging.getLogger(__name__)

JOB_GRAPHS_TABLE = "job_graphs"
JOB_RESULTS_TABLE = "job_results"
GRAPHS_DIR = "_graphs"  # inside the job_graphs table; see the module docstring for the underscore
# attempts of one change whose commits conflict with other writers' before giving up; each retry
# re-reads the table, and two JobManagers rarely write the same store in the same milliseconds
COMMIT_ATTEMPTS = 10
_BACKOFF_BASE_S = 0.005
_BACKOFF_MAX_S = 0.2

JOB_GRAPHS_SCHEMA = pa.schema([
    ("job_id", pa.string()),
    ("file", pa.string()),  # relative to the table root: _graphs/<job id>-<uuid>.json
    ("sha256", pa.string()),  # hex digest of the file's bytes
    ("size", pa.int64()),
    ("submitted_at_ms", pa.int64()),
])
JOB_RESULTS_SCHEMA = pa.schema([
    ("job_id", pa.string()),
    ("status", pa.string()),  # FINISHED, FAILED or CANCELED
    ("result_json", pa.string()),  # the serialized job result message, opaque to the store
    ("clean", pa.bool_()),
    ("created_at_ms", pa.int64()),
])

# Flink's JobIDs are hex strings; a job id also names its graph file, so it stays a plain name
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def _check_job_id(job_id: str) -> None:
    if not isinstance(job_id, str) or not _JOB_ID.match(job_id):
        raise HaStoreError(
            f"job id {job_id!r} cannot be stored in the HA stores: use 1 to 128 letters, digits, '_', '.' or '-' "
            "(Millrace's job ids are 32 hex digits)"
        )


def ha_cluster_dir(storage_dir: str, cluster_id: str) -> str:
    """`<storage dir>/<cluster id>`: where one cluster's HA stores live (local path or URI)."""
    cid = cluster_id.strip("/")  # Flink's default cluster id is "/default", a ZooKeeper path
    if not cid or ".." in cid.split("/"):
        raise HaStoreError(f"high-availability cluster id {cluster_id!r} cannot name a folder under {storage_dir}")
    base = storage_dir.rstrip("/") if "://" in storage_dir else os.path.abspath(storage_dir)
    return f"{base}/{cid}"


def _now_ms() -> int:
    return int(time.time() * 1000)


def _first_line(e: BaseException) -> str:
    """delta-rs appends a Rust backtrace to some messages: keep what it says, not where."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@dataclass(frozen=True)
class _Snapshot:
    """One version of an HA table: the DeltaTable (the base of a commit), its rows, its generation."""

    dt: Any
    rows: list[dict[str, Any]]
    generation: int  # the store's app transaction version at this snapshot (0: never changed)

    def row(self, job_id: str) -> dict[str, Any] | None:
        found = [r for r in self.rows if r["job_id"] == job_id]
        return found[-1] if found else None


# a change to apply to a snapshot: (DeltaTable, CommitProperties) -> None, one Delta commit
_Change = Callable[[Any, Any], None]


class _HaTable:
    """One HA Delta table: fresh snapshots, and read-modify-write changes serialized by its app transaction."""

    def __init__(self, table_uri: str, schema: pa.Schema, what: str, storage_options: dict[str, str] | None) -> None:
        self.uri = table_uri
        self.schema = schema
        self.what = what  # "job graph store", for messages
        self.app_id = f"millrace-ha-{table_uri.rstrip('/').rpartition('/')[2]}"
        self.storage_options = storage_options

    def _open(self) -> Any:
        """The newest DeltaTable, or None when there is no table yet."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dt = DeltaTable(self.uri, storage_options=self.storage_options)
        except TableNotFoundError:
            return None
        except Exception as e:  # a damaged _delta_log, permissions, an unreachable store
            raise HaStoreError(
                f"the {self.what} table {self.uri} cannot be read (is its _delta_log damaged?): {_first_line(e)}. "
                "A JobManager cannot recover its jobs without it: repair or restore the table from a backup."
            ) from e
        columns = [f.name for f in pa.schema(dt.schema().to_arrow())]
        if sorted(columns) != sorted(self.schema.names):
            raise HaStoreError(
                f"{self.uri} is a Delta table but not a {self.what}: it has the columns {columns}, "
                f"where a {self.what} has {self.schema.names}. Check high-availability.storageDir and the cluster id."
            )
        return dt

    def snapshot(self, job_id: str | None = None) -> _Snapshot | None:
        """The table now (only `job_id`'s rows if given), or None when it does not exist yet."""
        dt = self._open()
        if dt is None:
            return None
        try:
            table = dt.to_pyarrow_table(filters=[("job_id", "=", job_id)] if job_id is not None else None)
            generation = dt.transaction_version(self.app_id) or 0
        except Exception as e:  # a data file of the table is gone or unreadable
            raise HaStoreError(f"the {self.what} table {self.uri} cannot be read at version {dt.version()}: {_first_line(e)}") from e
        return _Snapshot(dt, pa.table(table).to_pylist(), int(generation))

    def _create(self) -> None:
        """Create the empty table (a concurrent creator may win: then its table is used)."""
        from deltalake import DeltaTable
        from deltalake import Schema as DeltaSchema

        try:
            DeltaTable.create(self.uri, DeltaSchema.from_arrow(self.schema), mode="ignore", storage_options=self.storage_options)
            log.info("created the %s table %s", self.what, self.uri)
        except Exception as e:
            if self._open() is None:
                raise HaStoreError(f"creating the {self.what} table {self.uri} failed: {_first_line(e)}") from e
            # another JobManager created it at the same moment (delta-rs: "protocol changed"): fine

    def mutate(self, plan: Callable[[_Snapshot], _Change | None], what: str, job_id: str | None = None) -> _Snapshot | None:
        """Apply `plan(snapshot)`'s change in ONE commit based on that snapshot; None from `plan`
        means nothing is to be done. A commit conflicting with a concurrent one is re-planned on a
        fresh snapshot. Returns the snapshot the change was applied to (None: nothing was done, or
        an ambiguous failure turned out to have landed). Raises HaStoreError when nothing landed."""
        from deltalake import CommitProperties, Transaction
        from deltalake.exceptions import CommitFailedError

        last: Exception | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            snap = self.snapshot(job_id)
            if snap is None:
                self._create()
                snap = self.snapshot(job_id)
                if snap is None:
                    raise HaStoreError(f"{what}: the {self.what} table {self.uri} is gone right after it was created")
            change = plan(snap)
            if change is None:
                return None
            props = CommitProperties(app_transactions=[Transaction(self.app_id, snap.generation + 1)])
            try:
                change(snap.dt, props)
                return snap
            except CommitFailedError as e:  # another writer committed since the snapshot: re-read, re-apply
                last = e
                log.info("%s: commit to %s conflicted with a concurrent one (attempt %d of %d): %s",
                         what, self.uri, attempt + 1, COMMIT_ATTEMPTS, _first_line(e))
                time.sleep(random.uniform(0, min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * 2 ** attempt)))
            except Exception as e:
                # a failure may come after the log entry was written: look again before saying anything
                try:
                    again = self.snapshot(job_id)
                except HaStoreError as unreadable:
                    raise HaStoreError(
                        f"{what}: the commit to {self.uri} failed and the table cannot be read to tell whether it landed: "
                        f"{_first_line(e)}; {unreadable}"
                    ) from e
                if again is not None and plan(again) is None:
                    log.warning("%s: the commit to %s raised after it landed (%s); treating it as committed", what, self.uri, _first_line(e))
                    return None
                raise HaStoreError(f"{what}: the commit to {self.uri} failed, nothing committed: {_first_line(e)}") from e
        raise HaStoreError(
            f"{what}: {COMMIT_ATTEMPTS} commits in a row to {self.uri} conflicted with concurrent commits (other JobManagers "
            f"writing the same store?), nothing committed; try again: {_first_line(last) if last else ''}"
        ) from last


def _filesystem(table_uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the table root inside it, for a local path or a URI."""
    return resolve_filesystem(table_uri, what="HA storage directory", error=HaStoreError)


class JobGraphStore:
    """The submitted, not yet terminal jobs of a cluster (Flink: DefaultJobGraphStore).

    The Dispatcher puts a job's graph when the job is submitted (and again when it changes, e.g.
    rescaled) and removes it once the job reached a globally terminal state and its result is in
    the JobResultStore. A JobManager that becomes leader recovers every job listed here that has no
    result. Job graphs are JSON strings, opaque to the store. Thread-safe, and safe to use from
    several JobManager processes on one storage directory: every call reads the table afresh.
    `storage_options` go to delta-rs; the graph files themselves are read and written through
    pyarrow's filesystem for the URI (credentials from the environment, as checkpoint files are).
    A JobManager that dies between writing a graph file and committing its row leaves that file
    behind, named by no row: garbage, never a wrong entry.
    """

    def __init__(self, storage_dir: str, cluster_id: str, storage_options: dict[str, str] | None = None) -> None:
        self.table_uri = f"{ha_cluster_dir(storage_dir, cluster_id)}/{JOB_GRAPHS_TABLE}"
        self.storage_options = storage_options
        self._table = _HaTable(self.table_uri, JOB_GRAPHS_SCHEMA, "job graph store", storage_options)
        self._fs, self._root = _filesystem(self.table_uri)

    # --- files -------------------------------------------------------------------------------
    def _path(self, rel: str) -> str:
        return f"{self._root}/{rel}"

    def _write_file(self, job_id: str, rel: str, data: bytes) -> None:
        try:
            self._fs.create_dir(self._path(GRAPHS_DIR), recursive=True)
            with self._fs.open_output_stream(self._path(rel)) as out:
                out.write(data)
        except Exception as e:
            self._delete_file(job_id, rel)
            raise HaStoreError(f"job {job_id}: writing its job graph file {self._path(rel)} failed, nothing stored: {e}") from e

    def _delete_file(self, job_id: str, rel: str) -> None:
        try:
            self._fs.delete_file(self._path(rel))
        except FileNotFoundError:
            pass
        except Exception as e:  # noqa: BLE001 - a left-over file costs space, not correctness: no row names it
            log.warning("job %s: could not delete the job graph file %s: %s", job_id, self._path(rel), e)

    def _read_verified(self, job_id: str, row: dict[str, Any]) -> str:
        path = self._path(row["file"])
        what_to_do = (
            "The job cannot be recovered from it: remove the entry (JobGraphStore.remove) and submit the job again "
            "from its latest savepoint or retained checkpoint, or restore the file from a backup."
        )
        try:
            with self._fs.open_input_file(path) as f:
                data = f.read()
        except FileNotFoundError as e:
            raise CorruptHaEntryError(f"job {job_id}: its job graph file {path} is missing. {what_to_do}") from e
        except Exception as e:  # permissions, an unreachable store: not damage, maybe passing
            raise HaStoreError(f"job {job_id}: reading its job graph file {path} failed: {e}") from e
        if len(data) != row["size"]:
            raise CorruptHaEntryError(
                f"job {job_id}: its job graph file {path} has {len(data)} bytes where {row['size']} were stored (truncated?). {what_to_do}"
            )
        if hashlib.sha256(data).hexdigest() != row["sha256"]:
            raise CorruptHaEntryError(f"job {job_id}: its job graph file {path} is not the bytes that were stored (sha256 differs). {what_to_do}")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:  # stored as such: the writer's bytes were not UTF-8 JSON
            raise CorruptHaEntryError(f"job {job_id}: its job graph file {path} is not UTF-8 text. {what_to_do}") from e

    # --- API ---------------------------------------------------------------------------------
    def put(self, job_id: str, job_graph_json: str, submitted_at_ms: int) -> None:
        """Store (or replace) a submitted job's graph: its file first, then ONE commit of its row.

        Replacing a job id's entry (a rescaled job) drops the old row in that commit and deletes
        the old file afterwards. On failure nothing is stored and the new file is deleted.
        """
        _check_job_id(job_id)
        data = job_graph_json.encode("utf-8")
        rel = f"{GRAPHS_DIR}/{job_id}-{uuid.uuid4().hex}.json"
        self._write_file(job_id, rel, data)
        row = pa.table({
            "job_id": [job_id], "file": [rel], "sha256": [hashlib.sha256(data).hexdigest()],
            "size": [len(data)], "submitted_at_ms": [int(submitted_at_ms)],
        }, schema=JOB_GRAPHS_SCHEMA)
        predicate = equals_predicate({"job_id": job_id})

        def plan(snap: _Snapshot) -> _Change | None:
            current = snap.row(job_id)
            if current is not None and current["file"] == rel:
                return None  # ours is the entry (an ambiguous failure that landed)
            return lambda dt, props: _write(dt, row, predicate, props)

        try:
            base = self._table.mutate(plan, f"job {job_id}: storing its job graph", job_id)
        except BaseException:
            self._discard_unless_referenced(job_id, rel)
            raise
        old = base.row(job_id) if base is not None else None
        if old is not None and old["file"] != rel:
            self._delete_file(job_id, old["file"])
        log.info("job %s: job graph stored in %s (%d bytes%s)", job_id, self.table_uri, len(data), ", replacing the previous one" if old else "")

    def _discard_unless_referenced(self, job_id: str, rel: str) -> None:
        """After a failed put: delete the new file if no row names it (unknown: keep it)."""
        try:
            snap = self._table.snapshot(job_id)
        except HaStoreError as e:
            log.warning("job %s: cannot tell whether the job graph file %s is referenced, keeping it: %s", job_id, self._path(rel), e)
            return
        current = snap.row(job_id) if snap is not None else None
        if current is None or current["file"] != rel:
            self._delete_file(job_id, rel)

    def remove(self, job_id: str) -> None:
        """Drop a job's entry in ONE commit, then delete its file; an absent job id is a no-op.

        Called once the job is globally terminal and its result is in the JobResultStore.
        """
        _check_job_id(job_id)
        predicate = equals_predicate({"job_id": job_id})

        def plan(snap: _Snapshot) -> _Change | None:
            if snap.row(job_id) is None:
                return None
            return lambda dt, props: dt.delete(predicate, commit_properties=props)

        base = self._table.mutate(plan, f"job {job_id}: removing its job graph", job_id)
        old = base.row(job_id) if base is not None else None
        if old is not None:
            self._delete_file(job_id, old["file"])
            log.info("job %s: job graph removed from %s", job_id, self.table_uri)

    def job_ids(self) -> list[str]:
        """The ids of every stored job, in submission order (`submitted_at_ms`, then id)."""
        snap = self._table.snapshot()
        if snap is None:
            return []
        latest = {r["job_id"]: r for r in snap.rows}
        return [r["job_id"] for r in sorted(latest.values(), key=lambda r: (r["submitted_at_ms"], r["job_id"]))]

    def get(self, job_id: str) -> str:
        """A stored job's graph JSON, checked against the size and sha256 stored with it.

        Raises HaEntryNotFoundError for an unknown job id and CorruptHaEntryError (naming the job
        and the file) when the file is missing or damaged. A file that vanished because the entry
        was replaced or removed meanwhile is read again from the newer entry, not reported as damage.
        """
        _check_job_id(job_id)
        seen: set[str] = set()
        while True:
            snap = self._table.snapshot(job_id)
            row = snap.row(job_id) if snap is not None else None
            if row is None:
                raise HaEntryNotFoundError(f"job {job_id}: no job graph in the job graph store {self.table_uri} (never submitted, or removed)")
            try:
                return self._read_verified(job_id, row)
            except CorruptHaEntryError:
                if row["file"] in seen:
                    raise
                seen.add(row["file"])
                again = self._table.snapshot(job_id)
                now = again.row(job_id) if again is not None else None
                if now is not None and now["file"] == row["file"]:
                    raise  # the current entry names the damaged file
                # replaced or removed while we read: look again


def _write(dt: Any, row: pa.Table, predicate: str, props: Any) -> None:
    """Replace the rows matching `predicate` with `row`, in ONE commit based on `dt`'s version."""
    from deltalake import write_deltalake

    write_deltalake(dt, row, mode="overwrite", predicate=predicate, commit_properties=props)


def _append(dt: Any, row: pa.Table, props: Any) -> None:
    """Add `row` in ONE commit based on `dt`'s version."""
    from deltalake import write_deltalake

    write_deltalake(dt, row, mode="append", commit_properties=props)


_TERMINAL = (JobStatus.FINISHED.value, JobStatus.FAILED.value, JobStatus.CANCELED.value)  # the globally terminal ones


class JobResultEntry(BaseModel):
    """One job's result in the JobResultStore (Flink: JobResultEntry)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    job_id: str
    status: str  # the globally terminal JobStatus: FINISHED, FAILED or CANCELED
    result_json: str  # the serialized job result message; the store does not look inside
    clean: bool = False  # False (dirty): the job's HA data awaits cleanup; True: it was removed
    created_at_ms: int

    @field_validator("status", mode="before")
    @classmethod
    def _terminal(cls, v: Any) -> Any:
        v = v.value if isinstance(v, JobStatus) else v
        if v not in _TERMINAL:
            raise ValueError(f"a job result's status is one of {', '.join(_TERMINAL)}, got {v!r}")
        return v


class JobResultStore:
    """Results of terminated jobs, dirty until their cleanup is done (Flink: JobResultStore, FLIP-194).

    When a job reaches a globally terminal state the Dispatcher creates a *dirty* entry before it
    cleans up anything; a job with an entry is never recovered or run again, whatever a new leader
    finds in the JobGraphStore. Once the job graph, checkpoints and other HA data are removed the
    entry is marked *clean*. A new leader retries the cleanup of every dirty entry. Entries are
    small (the result message's JSON is kept in the row). Thread-safe and multi-process-safe like
    the JobGraphStore.
    """

    def __init__(
        self, storage_dir: str, cluster_id: str, storage_options: dict[str, str] | None = None, clock: Callable[[], int] = _now_ms
    ) -> None:
        self.table_uri = f"{ha_cluster_dir(storage_dir, cluster_id)}/{JOB_RESULTS_TABLE}"
        self.storage_options = storage_options
        self._table = _HaTable(self.table_uri, JOB_RESULTS_SCHEMA, "job result store", storage_options)
        self._clock = clock  # milliseconds, for created_at_ms

    def create_dirty(self, job_id: str, status: str | JobStatus, result_json: str) -> None:
        """Record that a job terminated, before its cleanup starts (ONE commit).

        Idempotent: if the job already has an entry (dirty or clean), that first entry is kept and
        this call returns, so a Dispatcher retrying after a fail-over cannot overwrite the result.
        """
        _check_job_id(job_id)
        try:
            entry = JobResultEntry(job_id=job_id, status=status, result_json=result_json, clean=False, created_at_ms=self._clock())
        except ValidationError as e:
            problems = "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in e.errors())
            raise HaStoreError(f"job {job_id}: its job result was not stored in {self.table_uri}: {problems}") from e
        row = pa.Table.from_pylist([entry.model_dump()], schema=JOB_RESULTS_SCHEMA)
        kept: list[dict[str, Any]] = []

        def plan(snap: _Snapshot) -> _Change | None:
            existing = snap.row(job_id)
            if existing is not None:
                kept.append(existing)
                return None
            return lambda dt, props: _append(dt, row, props)

        if self._table.mutate(plan, f"job {job_id}: creating its dirty job result", job_id) is not None:
            log.info("job %s: dirty job result (%s) created in %s", job_id, entry.status, self.table_uri)
        elif kept:
            first = kept[0]
            log.info("job %s: already has a %s job result (%s) in %s; kept it", job_id,
                     "clean" if first["clean"] else "dirty", first["status"], self.table_uri)

    def mark_clean(self, job_id: str) -> None:
        """The job's HA data was removed: its entry goes from dirty to clean in ONE commit.

        A clean entry stays clean (no-op); raises HaEntryNotFoundError if the job has no entry.
        """
        _check_job_id(job_id)
        predicate = equals_predicate({"job_id": job_id})

        def plan(snap: _Snapshot) -> _Change | None:
            existing = snap.row(job_id)
            if existing is None:
                raise HaEntryNotFoundError(
                    f"job {job_id}: cannot mark its job result clean, the job result store {self.table_uri} has none (create it dirty first)"
                )
            if existing["clean"]:
                return None
            row = pa.Table.from_pylist([{**existing, "clean": True}], schema=JOB_RESULTS_SCHEMA)
            return lambda dt, props: _write(dt, row, predicate, props)

        if self._table.mutate(plan, f"job {job_id}: marking its job result clean", job_id) is not None:
            log.info("job %s: job result marked clean in %s", job_id, self.table_uri)

    def get(self, job_id: str) -> JobResultEntry | None:
        """The job's entry (dirty or clean), or None."""
        _check_job_id(job_id)
        snap = self._table.snapshot(job_id)
        row = snap.row(job_id) if snap is not None else None
        return None if row is None else self._entry(row)

    def has_result(self, job_id: str) -> bool:
        """Whether the job terminated (a dirty or clean entry): such a job must not run again."""
        return self.get(job_id) is not None

    def dirty_results(self) -> list[JobResultEntry]:
        """Entries whose cleanup is pending, oldest first: a new leader finishes their cleanup."""
        return [e for e in self._entries() if not e.clean]

    def clean_results(self) -> list[JobResultEntry]:
        """Entries whose HA data was removed, oldest first."""
        return [e for e in self._entries() if e.clean]

    def _entries(self) -> list[JobResultEntry]:
        snap = self._table.snapshot()
        if snap is None:
            return []
        latest = {r["job_id"]: r for r in snap.rows}
        return sorted((self._entry(r) for r in latest.values()), key=lambda e: (e.created_at_ms, e.job_id))

    def _entry(self, row: dict[str, Any]) -> JobResultEntry:
        try:
            return JobResultEntry.model_validate(row)
        except ValidationError as e:
            raise HaStoreError(f"job {row.get('job_id')}: its entry in the job result store {self.table_uri} is not valid: {e}") from e
