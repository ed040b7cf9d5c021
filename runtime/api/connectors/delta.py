"""DeltaSink: parallel Parquet writers + one Delta commit per checkpoint on the JobMaster, on Sink V2
(`runtime/api/connectors/sink`: the generic wrapper carries committables through checkpoints, the
tails, FLIP-147's final committables, winner-only commits of speculative attempts and the
clean-up calls; this module keeps what is Delta's).

`DeltaWriter` (one per subtask): writes Parquet files of its batches directly into the table
directory under names that carry the sink, subtask and attempt, rolls a file at
`target_file_size` bytes. Files not in the Delta log are invisible to readers, so nothing is
visible before a commit. `prepare_commit` rolls its open files and hands them over as a
committable (files, schema, origin app id, replace_where scope).

`DeltaCommitter` (on the JobMaster):
- `commit(n, ...)`: ONE Delta transaction with every subtask's files, tagged (app id, version n),
  so a replayed commit adds nothing, and no file the table references is added again. Rows become
  visible per checkpoint.
- `restore(n, ...)`: committables of the restored checkpoint that never got committed are
  committed now, by the restore rules (`restore` below: another job's committed output is not
  added again; an overwrite or replace_where applies once per output lineage); `clean_up` deletes
  the restarted subtasks' files that no commit references.
- `commit_end`: the tail, exactly once (version = last checkpoint + 1, or `app_version` for a job
  that never checkpointed). `mode="overwrite"` applies to the job's first commit only.
- A job that did not finish: files no commit references are deleted by `close()`.
- One table, one writing job: `start()` takes the table's lease (`runtime/storage/table_lease.py`)
  and fails the job when another running job's sink holds it; the lease is renewed while the job
  runs, checked before every commit and released at the end. `allow_concurrent_writers=True`
  shares the table with other such sinks (appends only).
"""
from __future__ import annotations

import logging
import os
import time
import uuid
from typing import Any

import numpy as np

from runtime.api.connectors.base import Sink
from runtime.api.connectors.sink import (
    Committer,
    CommitterContext,
    CommitterCoordinator,
    SinkWriter,
    SinkWriterContext,
    SinkWriterOperator,
    TwoPhaseCommittingSink,
)
from runtime.core.errors import InvalidProgramError, StorageError
from runtime.core.operators import OperatorCoordinatorContext
from runtime.core.records import ColumnBatch, RecordBatch
from runtime.core.row import Row, named_row_columns
from runtime.storage.table_lease import DEFAULT_LEASE_TIMEOUT_S, LEASE_DIR, LeaseRegister, TableLease

log = logging.getLogger(__name__)

DEFAULT_TARGET_FILE_SIZE = 128 * 1024 * 1024


def _filesystem(table_uri: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, base path) for a local path or a URI."""
    import pyarrow.fs as pafs

    if "://" in table_uri:
        return pafs.FileSystem.from_uri(table_uri)
    return pafs.LocalFileSystem(), os.path.abspath(table_uri)


def check_output_location(table_uri: str) -> None:
    """Refuse a location that holds something other than a Delta table: a sink that built a table
    around the user's files would later let VACUUM delete them. Missing, empty or a Delta table
    (it has a _delta_log) is fine. Runs when the job starts, before any task writes."""
    import pyarrow.fs as pafs

    fs, base = _filesystem(table_uri)
    info = fs.get_file_info(base)
    if info.type == pafs.FileType.NotFound:
        return
    if info.type != pafs.FileType.Directory:
        raise StorageError(f"Delta sink: {table_uri} is a file, not a directory: give the sink a directory for its table")
    entries = fs.get_file_info(pafs.FileSelector(base, recursive=False))
    names = sorted(os.path.basename(e.path.rstrip("/")) for e in entries)
    # a table lease: a Millrace sink's table before its first commit (its lease decides who may write)
    if not names or "_delta_log" in names or LEASE_DIR in names:
        return
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise StorageError(
        f"Delta sink: {table_uri} is not empty and not a Delta table (it holds {shown}); nothing was written. "
        "Give the sink an empty or new directory, or an existing Delta table"
    )


def _remove_empty_dirs(table_uri: str) -> None:
    """Remove the directory tree at `table_uri` if it holds no file (deepest first)."""
    import pyarrow.fs as pafs

    fs, base = _filesystem(table_uri)
    infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    if any(i.type == pafs.FileType.File for i in infos):
        return
    for d in sorted((i.path for i in infos if i.type == pafs.FileType.Directory), key=len, reverse=True):
        fs.delete_dir(d)
    if fs.get_file_info(base).type == pafs.FileType.Directory:
        fs.delete_dir(base)


def _to_arrow_schema(schema: Any) -> Any:
    if schema is None:
        return None
    import pyarrow as pa

    if isinstance(schema, pa.Schema):
        return schema
    to_schema = getattr(schema, "to_arrow_schema", None)
    if to_schema is not None and to_schema() is not None:
        return to_schema()
    raise InvalidProgramError(f"DeltaSink: schema must be a pyarrow.Schema or Types.ROW_NAMED, got {schema!r}")


def _close_quietly(resource: Any) -> None:
    try:
        resource.close()
    except Exception:  # clean-up after a failure goes on
        log.debug("closing %r failed", resource, exc_info=True)


def _delta_compatible(schema: Any) -> Any:
    """Delta stores timestamps in microseconds; cast other units."""
    import pyarrow as pa

    fields = []
    for f in schema:
        if pa.types.is_timestamp(f.type) and f.type.unit != "us":
            f = f.with_type(pa.timestamp("us", tz=f.type.tz))
        fields.append(f)
    return pa.schema(fields)


def batch_to_arrow(batch: RecordBatch, schema: Any) -> Any:
    """A RecordBatch as a pyarrow Table (with `schema` if given)."""
    import pyarrow as pa

    if isinstance(batch, ColumnBatch):
        table = pa.Table.from_batches([batch.to_arrow()])
        if schema is not None:
            table = table.select(schema.names).cast(schema, safe=False)  # ns -> us truncates
        return table
    names = None if schema is None else schema.names
    rows = batch.rows()
    columns = named_row_columns(rows)
    if columns is not None:  # Rows with the same field names: transposed in C, no dict per row
        if names is not None:
            columns = {n: columns.get(n) or [None] * len(rows) for n in names}
        return pa.Table.from_pydict(columns, schema=schema)
    dicts = [_as_dict(r, names) for r in rows]
    return pa.Table.from_pylist(dicts, schema=schema)


def _as_dict(r: Any, names: list[str] | None) -> dict[str, Any]:
    if isinstance(r, dict):
        return r
    if isinstance(r, Row) and r.field_names is not None:
        return r.as_dict()
    if names is not None and isinstance(r, (Row, tuple, list)):
        return dict(zip(names, r))
    raise InvalidProgramError(
        f"DeltaSink: cannot turn a {type(r).__name__} record into columns; emit named Rows or dicts, "
        "or give DeltaSink a schema"
    )


def _column_stats(table: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, int]]:
    """Per-column min / max (ints, finite floats, strings) and null counts of one table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, col in zip(table.column_names, table.columns):
        nulls[name] = int(col.null_count)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)):
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        if lo is None or (isinstance(lo, float) and not (np.isfinite(lo) and np.isfinite(hi))):
            continue
        mins[name], maxs[name] = lo, hi
    return mins, maxs, nulls


class _OpenFile:
    def __init__(self, rel_path: str, abs_path: str, writer: Any, partition_values: dict[str, str | None]) -> None:
        self.rel_path = rel_path
        self.abs_path = abs_path
        self.writer = writer
        self.partition_values = partition_values
        self.bytes_estimate = 0
        self.num_records = 0
        self.mins: dict[str, Any] = {}
        self.maxs: dict[str, Any] = {}
        self.nulls: dict[str, int] = {}

    def update_stats(self, table: Any) -> None:
        mins, maxs, nulls = _column_stats(table)
        for k, v in mins.items():
            self.mins[k] = v if k not in self.mins else min(self.mins[k], v)
        for k, v in maxs.items():
            self.maxs[k] = v if k not in self.maxs else max(self.maxs[k], v)
        for k, v in nulls.items():
            self.nulls[k] = self.nulls.get(k, 0) + v


def _partition_str(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class DeltaWriter(SinkWriter[dict[str, Any]]):
    """One subtask's Parquet files; a committable is one pre-commit's files with the schema, the
    origin (app id) and the replace_where scope (a restore's rules read those)."""

    def __init__(self, sink: DeltaSink, context: SinkWriterContext) -> None:
        self.sink = sink
        self.context = context
        declared = _to_arrow_schema(sink.schema)
        self._schema = _delta_compatible(declared) if declared is not None else None
        self._open: dict[tuple, _OpenFile] = {}
        self._done: list[dict[str, Any]] = []
        self._written: list[str] = []  # absolute paths, for clean-up on failure
        self._token = uuid.uuid4().hex[:16]
        self._handed_over = 0  # files in self._written[:n] were handed over: never deleted here
        self._fs, self._base = _filesystem(sink.path)
        self._fs.create_dir(self._base, recursive=True)

    def write(self, batch: RecordBatch) -> None:
        table = batch_to_arrow(batch, self._schema)
        if self._schema is None:
            self._schema = _delta_compatible(table.schema)  # first batch fixes the schema
        # safe=False: nanosecond timestamps are truncated to Delta's microseconds, not refused
        table = table.cast(self._schema, safe=False) if table.schema != self._schema else table
        parts = self.sink.partition_by or []
        if not parts:
            self._write((), {}, table)
            return
        missing = [p for p in parts if p not in table.column_names]
        if missing:
            raise InvalidProgramError(f"DeltaSink({self.sink.path}): partition column(s) {missing} not in {table.column_names}")
        keys = list(zip(*(table.column(p).to_pylist() for p in parts)))
        groups: dict[tuple, list[int]] = {}
        for i, k in enumerate(keys):
            groups.setdefault(k, []).append(i)
        data = table.drop_columns(parts)  # Delta keeps partition values in the log, not the files
        scope = self.sink.replace_where
        for k, idx in groups.items():
            pv = {p: _partition_str(v) for p, v in zip(parts, k)}
            if scope is not None and any(pv[c] != v for c, v in scope.items()):
                raise InvalidProgramError(
                    f"DeltaSink({self.sink.path}): a row of partition {pv} is outside replace_where {scope}; nothing of it is written"
                )
            self._write(k, pv, data.take(idx) if len(idx) != len(table) else data)

    def _write(self, key: tuple, partition_values: dict[str, str | None], table: Any) -> None:
        import pyarrow.parquet as pq

        f = self._open.get(key)
        if f is None:
            subdir = "/".join(
                f"{p}={'__HIVE_DEFAULT_PARTITION__' if v is None else v}" for p, v in partition_values.items()
            )
            # the sink id, subtask and attempt in the name let a restore find the files of a lost attempt
            c = self.context
            name = f"{file_prefix(self.sink)}{self._token}-s{c.subtask_index}-a{c.attempt_number}-{len(self._written):05d}.parquet"
            rel = f"{subdir}/{name}" if subdir else name
            abs_path = f"{self._base}/{rel}"
            if subdir:
                self._fs.create_dir(f"{self._base}/{subdir}", recursive=True)
            sink = self._fs.open_output_stream(abs_path)
            self._written.append(abs_path)  # tracked at once: a failure below still cleans it up
            try:
                writer = pq.ParquetWriter(sink, table.schema)
            except BaseException:
                _close_quietly(sink)
                raise
            f = _OpenFile(rel, abs_path, (writer, sink), partition_values)
            self._open[key] = f
        f.writer[0].write_table(table)
        f.num_records += table.num_rows
        f.bytes_estimate += table.nbytes
        f.update_stats(table)
        if f.bytes_estimate >= self.sink.target_file_size:
            self._roll(key)

    def _roll(self, key: tuple) -> None:
        f = self._open.pop(key)
        writer, stream = f.writer
        try:
            writer.close()
        finally:
            stream.close()
        size = self._fs.get_file_info(f.abs_path).size
        self._done.append(
            {
                "path": f.rel_path,
                "size": int(size),
                "num_records": f.num_records,
                "partition_values": f.partition_values,
                "min_values": f.mins,
                "max_values": f.maxs,
                "null_count": f.nulls,
                "modification_time": int(time.time() * 1000),
            }
        )

    def prepare_commit(self) -> list[dict[str, Any]]:
        """Pre-commit: roll every open file; the files since the last call become a committable.
        Also without files: the origin app id tells a restore whose output this state stands for
        (what it committed is not added again; whether its overwrite / replace_where was applied)."""
        for key in list(self._open):
            self._roll(key)
        files, self._done = self._done, []
        self._handed_over = len(self._written)
        return [{"files": files, "schema": self._schema, "app_id": sink_app_id(self.sink, self.context.job_id), "scope": self.sink.replace_where}]

    def abort(self) -> None:
        # failed or canceled before reporting: nobody will commit these files (files handed over may be
        # committed from a checkpoint on restore: the committer decides about those)
        for f in self._open.values():
            _close_quietly(f.writer[0])  # separately: a failing writer must not leak its stream
            _close_quietly(f.writer[1])
        self._open.clear()
        for p in self._written[self._handed_over :]:
            try:
                self._fs.delete_file(p)
            except Exception:  # clean-up after a failure goes on
                log.debug("could not delete uncommitted Delta file %s", p, exc_info=True)


class DeltaCommitter(Committer[dict[str, Any]]):
    """Commits the sink's files: one Delta transaction per completed checkpoint, and the tail at the end."""

    def __init__(self, sink: DeltaSink, context: CommitterContext) -> None:
        self.sink = sink
        self.context = context
        declared = _to_arrow_schema(sink.schema)
        self._schema: Any = _delta_compatible(declared) if declared is not None else None
        self._schema_conflicts: list[str] = []
        self._committed = False
        self._keep_files = False  # the commit's outcome is unknown: never delete what it may reference
        self._any_commit = False  # overwrite applies to the first commit only
        # paths this sink committed (or, after a restore, that the table references): a writer offers
        # a file again until it hears its checkpoint completed, so a file may arrive twice
        self._committed_paths: set[str] = set()
        # files of checkpoints a later run may restore (the job ends without finishing): never deleted here
        self._retained_paths: set[str] = set()
        self.checkpoint_commits = 0
        self.version: int | None = None
        self._lease: TableLease | None = None
        self._created_location = False

    @property
    def job_id(self) -> str:
        return self.context.job_id

    @property
    def operator_name(self) -> str:
        return self.context.operator_name

    @property
    def app_id(self) -> str:
        return sink_app_id(self.sink, self.job_id)

    def start(self) -> None:
        check_output_location(self.sink.path)
        fs, base = _filesystem(self.sink.path)
        import pyarrow.fs as pafs

        self._created_location = fs.get_file_info(base).type == pafs.FileType.NotFound
        # one table, one writing job (or only concurrent appenders): refused here, before any task writes
        lease = TableLease(
            self.sink.path, self.job_id, self.sink.sink_id, operator=self.operator_name,
            # getattr: a sink pickled before the lease existed (a job graph kept by HA) shares nothing
            concurrent=getattr(self.sink, "allow_concurrent_writers", False),
            timeout_s=getattr(self.sink, "lease_timeout_s", DEFAULT_LEASE_TIMEOUT_S),
        )
        lease.acquire()
        self._lease = lease
        lease.start_renewing()

    def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is None:
            return
        try:
            lease.release()
        except Exception as e:  # noqa: BLE001 - an unreleased lease expires by itself
            log.warning("Delta sink %s: could not release the table lease (%s); it expires in %.0f s", self.sink.path, e, lease.timeout_s)

    def _note_schema(self, subtask: int, schema: Any) -> None:
        if schema is None:
            return
        if self._schema is None:
            self._schema = schema
        elif not schema.equals(self._schema):
            self._schema_conflicts.append(f"subtask {subtask} wrote {schema.to_string(show_schema_metadata=False)!r}")

    def _check_schemas(self) -> None:
        if self._schema_conflicts:
            raise StorageError(
                f"job {self.job_id}: Delta sink '{self.operator_name}' got files with different schemas "
                f"(expected {self._schema.to_string(show_schema_metadata=False)!r}; "
                f"{'; '.join(self._schema_conflicts)}); nothing committed. Declare DeltaSink(schema=...) or make the types agree."
            )

    def _table_schema(self) -> Any:
        schema = self._schema
        if self.sink.partition_by:
            import pyarrow as pa

            # files hold no partition columns; the table schema has them (strings if unknown)
            for p in self.sink.partition_by:
                if p not in schema.names:
                    schema = schema.append(pa.field(p, pa.string()))
        return schema

    def _commit(self, files: list[dict[str, Any]], version: int) -> Any:
        from runtime.storage.delta_commit import CommitOutcomeUnknownError, commit_add_files  # only storage/ touches deltalake

        mode = self.sink.mode if not self._any_commit else "append"
        if self._lease is not None:
            self._lease.ensure_held()  # another job may own the table now: commit nothing
        try:
            result = commit_add_files(
                self.sink.path, files, self._table_schema(), mode=mode, partition_by=self.sink.partition_by,
                app_id=self.app_id, version=version, storage_options=self.sink.storage_options,
                # a null partition's value is None: delta_commit's replace_where should say dict[str, str | None]
                replace_where=self.sink.replace_where if mode == "overwrite" else None,  # type: ignore[arg-type]  # see above
            )
        except CommitOutcomeUnknownError:
            self._keep_files = True
            raise
        self._any_commit = True
        self.version = result.version
        if result.committed:  # a skipped replay references none of these files
            self._committed_paths.update(f["path"] for f in files)
        return result

    def _not_committed(self, files: list[dict[str, Any]]) -> list[dict[str, Any]]:
        seen: set[str] = set()
        out = []
        for f in files:
            if f["path"] not in self._committed_paths and f["path"] not in seen:
                seen.add(f["path"])
                out.append(f)
        return out

    def _flatten(self, by_subtask: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = []
        for subtask, per_subtask in enumerate(by_subtask):
            for c in per_subtask:
                self._note_schema(subtask, c.get("schema"))
                files.extend(c["files"])
        return files

    # --- checkpoints (two-phase commit) ---------------------------------------------------------
    def commit(self, checkpoint_id: int, by_subtask: list[list[dict[str, Any]]]) -> None:
        """Checkpoint n is durable: commit every file it holds in one transaction (version n)."""
        files = self._not_committed(self._flatten(by_subtask))
        self._check_schemas()
        if files:
            result = self._commit(files, checkpoint_id)
            if result.committed:
                self.checkpoint_commits += 1
            log.info("Delta sink %s: checkpoint %d %s %d files", self.sink.path, checkpoint_id, "committed" if result.committed else "already had", len(files))

    def _refresh(self) -> None:
        """What the table says after a restart: the files it references, whether this job committed."""
        from runtime.storage.delta_commit import committed_version, referenced_files

        self._committed_paths |= referenced_files(self.sink.path, self.sink.storage_options)
        if committed_version(self.sink.path, self.app_id, self.sink.storage_options) is not None:
            self._any_commit = True  # this job committed before: its overwrite was applied then

    def restore(self, checkpoint_id: int, by_subtask: list[list[dict[str, Any]]]) -> None:
        """Restart from checkpoint n: commit n if it never was, by the restore rules below."""
        from runtime.storage.delta_commit import committed_version

        self._refresh()
        origins = {c["app_id"] for per in by_subtask for c in per if c.get("app_id")}
        done = {o: committed_version(self.sink.path, o, self.sink.storage_options) for o in origins}
        # restored (from a checkpoint or a savepoint, maybe of another job): the output goes on.
        # An overwrite was applied if the job whose state this is committed anything (state of
        # old savepoints without origins: assume so, never wipe); a replace_where only if that
        # job replaced the same partitions. Decided before the restore's own commit below.
        scope = self.sink.replace_where
        if scope is None:
            applied = any(v is not None for v in done.values()) or not origins
        else:
            applied = any(c.get("scope") == scope and done.get(c.get("app_id")) is not None for per in by_subtask for c in per)
        self._any_commit = self._any_commit or applied
        by_subtask = self._not_committed_elsewhere(checkpoint_id, by_subtask, done)
        files = self._not_committed(self._flatten(by_subtask))
        if files:
            self._check_schemas()
            result = self._commit(files, checkpoint_id)  # skipped when (app id, n) is in the log already
            if result.committed:
                self.checkpoint_commits += 1
                log.info("Delta sink %s: committed checkpoint %d on restore (%d files)", self.sink.path, checkpoint_id, len(files))

    def _not_committed_elsewhere(
        self, checkpoint_id: int, by_subtask: list[list[dict[str, Any]]], done: dict[str, int | None]
    ) -> list[list[dict[str, Any]]]:
        """Committables another job (another app id) committed itself before its state was taken
        over are not committed again: the table may have moved on since (e.g. those partitions
        were replaced), and re-adding their files would bring old rows back. `done`: origin app id
        -> the newest version it committed."""
        out = []
        for per in by_subtask:
            keep = []
            for c in per:
                origin = c.get("app_id")
                version = done.get(origin) if origin else None
                if origin and origin != self.app_id and version is not None and version >= checkpoint_id:
                    c = {**c, "files": []}
                keep.append(c)
            out.append(keep)
        return out

    def clean_up(self, subtasks: set[int]) -> None:
        self._refresh()
        self._delete_orphans(subtasks)

    def _delete_orphans(self, subtasks: set[int]) -> None:
        """Files of these subtasks' attempts that the table does not reference (Flink: the committer's clean-up)."""
        from runtime.storage.delta_commit import referenced_files

        fs, base = _filesystem(self.sink.path)
        import pyarrow.fs as pafs

        try:
            infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except Exception:  # best effort: a folder that cannot be listed leaves nothing to delete
            log.debug("Delta sink %s: could not list %s", self.sink.path, base, exc_info=True)
            return
        prefix = file_prefix(self.sink)
        referenced = referenced_files(self.sink.path, self.sink.storage_options)
        orphans = []
        for info in infos:
            name = info.base_name
            if info.type != pafs.FileType.File or not name.startswith(prefix):
                continue
            rel = info.path[len(base) :].lstrip("/")
            subtask = _subtask_of(name)
            if rel not in referenced and subtask in subtasks:
                orphans.append({"path": rel})
        if orphans:
            log.info("Delta sink %s: deleting %d files no commit references", self.sink.path, len(orphans))
            self._delete(orphans)

    def retain(self, committables: list[dict[str, Any]]) -> None:
        """The job ends without finishing and a checkpoint holding these may be restored by a later
        run, which commits their files (Flink: pending files stay for the committer of the restored job)."""
        self._retained_paths |= {f["path"] for c in committables for f in c.get("files", [])}

    # --- end of the job -----------------------------------------------------------------------
    def commit_end(self, last_checkpoint: int | None, by_subtask: list[list[dict[str, Any]]]) -> dict[str, Any]:
        result = self._finish(last_checkpoint, by_subtask)
        self._release_lease()  # the last commit is done: the table is free for the next job
        return result

    def _finish(self, last_checkpoint: int | None, by_subtask: list[list[dict[str, Any]]]) -> dict[str, Any]:
        files = self._not_committed(self._flatten(by_subtask))
        self._check_schemas()
        from runtime.storage.delta_commit import table_schema  # only storage/ touches deltalake

        version = self.sink.app_version if last_checkpoint is None else last_checkpoint + 1
        if not files and self._any_commit:
            self._committed = True
            return self._summary(files)
        if self._schema is None and self.sink.mode == "overwrite":
            # no data: an overwrite still replaces the table's contents (with nothing)
            self._schema = table_schema(self.sink.path, self.sink.storage_options)
        if self._schema is None:
            # no data, no declared schema, no table: nothing to create or commit
            self._committed = True
            return {"delta_table": self.sink.path, "delta_version": None, "delta_files": 0, "delta_records": 0}
        result = self._commit(files, version)
        self._committed = True
        if not result.committed:
            # a replay of a commit that already landed: this run's files are referenced by nothing
            self._delete(files)
            return {"delta_table": self.sink.path, "delta_version": self.version, "delta_files": 0, "delta_records": 0, "delta_commit_skipped": True}
        return self._summary(files)

    def _summary(self, files: list[dict[str, Any]]) -> dict[str, Any]:
        out = {
            "delta_table": self.sink.path,
            "delta_version": self.version,
            "delta_files": len(files),
            "delta_records": sum(int(f.get("num_records", 0)) for f in files),
        }
        if self.checkpoint_commits:
            out["delta_checkpoint_commits"] = self.checkpoint_commits
        return out

    def discard(self, committables: list[dict[str, Any]]) -> None:
        self._delete([f for c in committables for f in c.get("files", [])])

    def close(self, finished: bool, uncommitted: list[dict[str, Any]]) -> None:
        if not finished and not self._keep_files:
            # the job did not finish: its tail files are referenced by no commit
            self.discard(uncommitted)
            # files no report or commit names: handed to checkpoints that never completed, or written
            # by attempts whose TaskManager died before they could report (with or without checkpoints)
            try:
                self._delete_orphans(set(range(self.context.current_parallelism())))
            except Exception:  # noqa: BLE001 - clean-up is best effort
                log.warning("Delta sink %s: could not look for files no commit references", self.sink.path)
        self._release_lease()  # after the clean-up: until then no other job may take the table
        if not finished and not self._keep_files and self._created_location and not self._any_commit:
            try:  # a new table that never got a commit leaves nothing (its lease folder, if no one else holds it, too)
                if LeaseRegister(self.sink.path).remove_if_free():
                    _remove_empty_dirs(self.sink.path)
            except Exception:  # noqa: BLE001 - clean-up is best effort
                log.warning("Delta sink %s: could not remove the folder of a table that never got a commit", self.sink.path)

    def _delete(self, files: list[dict[str, Any]]) -> None:
        # never a committed file, nor one a restore of a retained checkpoint commits
        files = [f for f in files if f["path"] not in self._committed_paths and f["path"] not in self._retained_paths]
        if not files:
            return
        fs, base = _filesystem(self.sink.path)
        for f in files:
            try:
                fs.delete_file(f"{base}/{f['path']}")
            except Exception:  # clean-up is best effort
                log.warning("could not delete uncommitted Delta file %s", f["path"], exc_info=True)


class DeltaSinkCoordinator(CommitterCoordinator):
    """The Delta sink's committer on the JobMaster, in the generic Sink V2 coordinator."""

    def __init__(self, sink: DeltaSink, context: OperatorCoordinatorContext) -> None:
        super().__init__(context, DeltaCommitter(sink, context))
        self.sink = sink


def sink_app_id(sink: DeltaSink, job_id: str) -> str:
    # the sink's own id: two sinks of one job on one table must not share a transaction id
    return sink.app_id or f"millrace-{job_id}-{sink.sink_id}"


def file_prefix(sink: DeltaSink) -> str:
    return f"part-{sink.sink_id}-"


def _subtask_of(name: str) -> int | None:
    """The subtask in a writer's file name: part-<sink>-<token>-s<subtask>-a<attempt>-<n>.parquet."""
    for piece in name.split("-"):
        if len(piece) > 1 and piece[0] == "s" and piece[1:].isdigit():
            return int(piece[1:])
    return None


class DeltaSinkCoordinatorProvider:
    def __init__(self, sink: DeltaSink) -> None:
        self.sink = sink

    def create(self, context: OperatorCoordinatorContext) -> DeltaSinkCoordinator:
        return DeltaSinkCoordinator(self.sink, context)


class DeltaSink(Sink, TwoPhaseCommittingSink[dict[str, Any]]):
    """`DeltaSink(path, schema=None, mode="append"|"overwrite", partition_by=None, replace_where=None)`.

    `replace_where={"day": "2026-01-03"}` (with mode "overwrite", partition columns only): the job's
    first commit replaces just those partitions (Delta's replaceWhere), and every row must fall in
    them. Unlike a plain overwrite it is applied again when the job is restored from the state of
    a job that wrote other partitions (e.g. yesterday's savepoint), not when its own output goes on.

    `app_id` / `app_version` tag the commit (Delta txn): a second commit with the same app id and a
    version not newer is skipped. Default app id: "millrace-<job id>-<sink id>" (unique per sink).

    One table, one writing job: the sink takes a lease on its table when the job starts (in
    `<path>/_millrace_lease/`), renews it while the job runs and releases it at the end; a job
    whose sink finds the table held by another running job fails at start, naming that job.
    `allow_concurrent_writers=True` (mode "append" only) shares the table with other sinks that
    set it too: their appends sit side by side. `lease_timeout_s` (default 60): how long a lease
    outlives its last renewal, i.e. how long a crashed JobManager on another host keeps the table.
    See docs/fault_tolerance.md.
    """

    def __init__(
        self,
        path: str,
        schema: Any = None,
        mode: str = "append",
        partition_by: list[str] | str | None = None,
        target_file_size: int = DEFAULT_TARGET_FILE_SIZE,
        app_id: str | None = None,
        app_version: int = 1,
        storage_options: dict[str, str] | None = None,
        replace_where: dict[str, Any] | None = None,
        allow_concurrent_writers: bool = False,
        lease_timeout_s: float = DEFAULT_LEASE_TIMEOUT_S,
    ) -> None:
        if mode not in ("append", "overwrite"):
            raise InvalidProgramError(f"DeltaSink({path}): mode must be 'append' or 'overwrite', got {mode!r}")
        if allow_concurrent_writers and mode != "append":
            raise InvalidProgramError(
                f"DeltaSink({path}): allow_concurrent_writers=True lets other jobs append to the table while this one runs, "
                f"so this sink may only append: mode={mode!r} would remove their rows. Use mode='append', or leave "
                "allow_concurrent_writers off to keep the table to this job"
            )
        if lease_timeout_s <= 0:
            raise InvalidProgramError(f"DeltaSink({path}): lease_timeout_s must be > 0, got {lease_timeout_s}")
        parts = [partition_by] if isinstance(partition_by, str) else list(partition_by or [])
        if replace_where is not None:
            outside = sorted(set(replace_where) - set(parts))
            if mode != "overwrite" or not replace_where or outside:
                raise InvalidProgramError(
                    f"DeltaSink({path}): replace_where {replace_where} needs mode='overwrite' and partition columns only "
                    f"(partition_by={parts}{f'; not partition columns: {outside}' if outside else ''})"
                )
        self.path = path
        self.schema = schema
        _to_arrow_schema(schema)  # validate early, at the call site
        self.mode = mode
        self.partition_by = [partition_by] if isinstance(partition_by, str) else (list(partition_by) if partition_by else None)
        self.target_file_size = int(target_file_size)
        self.app_id = app_id
        self.app_version = int(app_version)
        self.storage_options = storage_options
        # Delta's replaceWhere on partition columns: the first commit replaces only these partitions
        self.replace_where = {k: _partition_str(v) for k, v in replace_where.items()} if replace_where else None
        self.sink_id = uuid.uuid4().hex[:12]  # fixed in the JobGraph: the same for every attempt of this job
        # the table lease: other jobs' sinks are refused while this job runs, unless both allow concurrent appends
        self.allow_concurrent_writers = bool(allow_concurrent_writers)
        self.lease_timeout_s = float(lease_timeout_s)

    @staticmethod
    def for_path(path: str, mode: str = "append", **kwargs: Any) -> DeltaSink:
        return DeltaSink(path, mode=mode, **kwargs)

    def create_writer(self) -> SinkWriterOperator:
        return SinkWriterOperator(self)

    def create_sink_writer(self, context: SinkWriterContext) -> DeltaWriter:
        return DeltaWriter(self, context)

    def create_committer(self, context: CommitterContext) -> DeltaCommitter:
        return DeltaCommitter(self, context)

    def coordinator_provider(self) -> DeltaSinkCoordinatorProvider:
        return DeltaSinkCoordinatorProvider(self)

    def default_name(self) -> str:
        return f"DeltaSink({self.path})"
