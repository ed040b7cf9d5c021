"""Reading Delta tables with delta-rs: snapshots (version, files, schema, row count) and file contents.

The Delta source connector (runtime.api.connectors.delta_source) and the Dagster control plane
(sensors watching a table's version, asset checks, materialization metadata) read tables through
this module, so only `storage/` imports the Delta libraries.

A snapshot is resolved once (`snapshot(path, version)`): its file list pins the data a reader sees,
so a job whose subtasks read their files later still reads exactly that version.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.core.errors import StorageError


@dataclass(frozen=True)
class DeltaFile:
    """One data file of a snapshot (an `add` action)."""

    uri: str  # absolute path or URI
    size: int
    num_records: int | None
    partition_values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DeltaSnapshot:
    table_uri: str
    version: int
    schema: Any  # pyarrow.Schema (partition columns included)
    partition_columns: tuple[str, ...]
    files: tuple[DeltaFile, ...]

    @property
    def num_records(self) -> int | None:
        """Rows in the snapshot from the files' statistics (None if a file has no statistics)."""
        counts = [f.num_records for f in self.files if f.num_records is not None]
        return None if len(counts) < len(self.files) else sum(counts)


def _open(table_uri: str, version: int | None, storage_options: dict[str, str] | None) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table_uri, version=version, storage_options=storage_options)
    except TableNotFoundError:
        return None
    except Exception as e:  # e.g. a version that was never committed or was vacuumed
        raise StorageError(f"cannot open Delta table {table_uri} at version {version}: {e}") from e


def table_version(table_uri: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The table's newest version, or None when there is no Delta table at `table_uri`."""
    dt = _open(table_uri, None, storage_options)
    return None if dt is None else int(dt.version())


def snapshot(table_uri: str, version: int | None = None, storage_options: dict[str, str] | None = None) -> DeltaSnapshot:
    """The table at `version` (newest if None); raises StorageError if there is no table."""
    import pyarrow as pa

    dt = _open(table_uri, version, storage_options)
    if dt is None:
        raise StorageError(f"no Delta table at {table_uri}: write it first (or check the path)")
    schema = pa.schema(dt.schema().to_arrow())
    partition_columns = tuple(dt.metadata().partition_columns)
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    uris = dt.file_uris()
    # file_uris() and get_add_actions() list the same files in the same order; match by path to be safe
    by_rel = {a["path"]: a for a in actions}
    files = []
    for uri in uris:
        rel = next((p for p in by_rel if uri.endswith("/" + p) or uri == p), None)
        a = by_rel.get(rel, {}) if rel is not None else {}
        nrec = a.get("num_records")
        files.append(
            DeltaFile(
                uri=uri,
                size=int(a.get("size_bytes") or 0),
                num_records=None if nrec is None else int(nrec),
                partition_values={c: a.get(f"partition.{c}") for c in partition_columns},
            )
        )
    return DeltaSnapshot(str(table_uri), int(dt.version()), schema, partition_columns, tuple(files))


def read_table(
    table_uri: str, version: int | None = None, columns: Sequence[str] | None = None, storage_options: dict[str, str] | None = None
) -> Any:
    """The whole table (or `columns`) as one pyarrow Table."""
    dt = _open(table_uri, version, storage_options)
    if dt is None:
        raise StorageError(f"no Delta table at {table_uri}: write it first (or check the path)")
    import pyarrow as pa

    return pa.table(dt.to_pyarrow_table(columns=list(columns) if columns else None))


def _partition_column(value: Any, arrow_type: Any, n: int) -> Any:
    import pyarrow as pa

    arr = pa.array([value] * n)
    return arr.cast(arrow_type) if arr.type != arrow_type else arr


def iter_file_batches(
    file: DeltaFile,
    schema: Any,
    columns: Sequence[str] | None = None,
    batch_size: int = 65536,
    storage_options: dict[str, str] | None = None,
) -> Iterator[Any]:
    """pyarrow RecordBatches of one data file, partition columns filled in, in `schema`'s column order."""
    import pyarrow as pa
    import pyarrow.fs as pafs
    import pyarrow.parquet as pq

    wanted = list(columns) if columns else list(schema.names)
    missing = [c for c in wanted if c not in schema.names]
    if missing:
        raise StorageError(f"column(s) {missing} not in the Delta table's schema {schema.names}")
    in_file = [c for c in wanted if c not in file.partition_values]
    try:
        if "://" in file.uri and not file.uri.startswith("file://"):
            fs, path = pafs.FileSystem.from_uri(file.uri)
        else:
            fs, path = pafs.LocalFileSystem(), file.uri.removeprefix("file://")
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            present = set(pf.schema_arrow.names)
            for rb in pf.iter_batches(batch_size=batch_size, columns=[c for c in in_file if c in present]):
                cols = []
                for name in wanted:
                    target = schema.field(name).type
                    if name in file.partition_values:
                        cols.append(_partition_column(file.partition_values[name], target, rb.num_rows))
                    elif name not in present:  # a column added to the table after this file was written
                        cols.append(pa.nulls(rb.num_rows, target))
                    else:
                        col = rb.column(rb.schema.get_field_index(name))
                        cols.append(col.cast(target) if col.type != target else col)
                yield pa.RecordBatch.from_arrays(cols, names=wanted)
    except StorageError:
        raise
    except FileNotFoundError as e:
        raise StorageError(
            f"Delta data file {file.uri} is gone (vacuumed or overwritten since the snapshot was taken): {e}; "
            "re-run the job to read the newest version"
        ) from e


# --- the table's log, commit by commit (the continuous Delta source follows it) -----------------------


@dataclass(frozen=True)
class DeltaCommit:
    """What one commit did to the table's data (Spark's Delta streaming source reads the same)."""

    version: int
    timestamp_ms: int
    operation: str
    added: tuple[DeltaFile, ...]  # files added with dataChange (new rows)
    removed: tuple[str, ...]  # paths removed with dataChange (rows deleted or rewritten)
    schema: Any | None  # pyarrow.Schema if the commit changed the table's metadata, else None


def _log_fs(table_uri: str) -> tuple[Any, str]:
    import pyarrow.fs as pafs

    if "://" in table_uri and not table_uri.startswith("file://"):
        fs, path = pafs.FileSystem.from_uri(table_uri)
        return fs, path.rstrip("/")
    return pafs.LocalFileSystem(), table_uri.removeprefix("file://").rstrip("/")


def _file_uri(table_uri: str, path: str) -> str:
    from urllib.parse import unquote

    if "://" in path or path.startswith("/"):
        return path
    return table_uri.rstrip("/") + "/" + unquote(path)


def _arrow_schema(schema_string: str) -> Any:
    import pyarrow as pa
    from deltalake import Schema

    return pa.schema(Schema.from_json(schema_string).to_arrow())


def read_commit(table_uri: str, version: int, partition_columns: Sequence[str] = (), storage_options: dict[str, str] | None = None) -> DeltaCommit | None:
    """Commit `version` of the table's log, or None if it does not exist (yet). Reads the commit's
    JSON file only (one small read), never the whole table state."""
    import json

    fs, root = _log_fs(table_uri)
    path = f"{root}/_delta_log/{version:020d}.json"
    try:
        with fs.open_input_stream(path) as f:
            text = f.read().decode()
    except FileNotFoundError:
        return None
    except OSError as e:
        if "not found" in str(e).lower() or "no such file" in str(e).lower():
            return None
        raise StorageError(f"cannot read commit {version} of Delta table {table_uri}: {e}") from e
    added: list[DeltaFile] = []
    removed: list[str] = []
    schema = None
    timestamp, operation = 0, ""
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "add" in action:
            a = action["add"]
            if a.get("dataChange", True):
                stats = json.loads(a["stats"]) if a.get("stats") else {}
                nrec = stats.get("numRecords")
                added.append(DeltaFile(
                    uri=_file_uri(table_uri, a["path"]), size=int(a.get("size") or 0),
                    num_records=None if nrec is None else int(nrec), partition_values=dict(a.get("partitionValues") or {}),
                ))
        elif "remove" in action:
            r = action["remove"]
            if r.get("dataChange", True):
                removed.append(r["path"])
        elif "metaData" in action:
            schema = _arrow_schema(action["metaData"]["schemaString"])
        elif "commitInfo" in action:
            timestamp = int(action["commitInfo"].get("timestamp") or 0)
            operation = str(action["commitInfo"].get("operation") or "")
    return DeltaCommit(version, timestamp, operation, tuple(added), tuple(removed), schema)


def log_moved_past(table_uri: str, version: int, storage_options: dict[str, str] | None = None) -> int | None:
    """Commit `version` was not found: a newer version the log holds (so `version` is gone from it:
    log clean-up), or None when the table simply has not reached `version` yet. Looks at two small
    files (the next commit, `_last_checkpoint`), never at the whole table state."""
    import json

    import pyarrow.fs as pafs

    fs, root = _log_fs(table_uri)
    if read_commit(table_uri, version, (), storage_options) is not None:
        return None  # it landed meanwhile
    nxt = f"{root}/_delta_log/{version + 1:020d}.json"
    if fs.get_file_info(nxt).type == pafs.FileType.File:
        return version + 1
    try:
        with fs.open_input_stream(f"{root}/_delta_log/_last_checkpoint") as f:
            checkpoint = int(json.loads(f.read().decode())["version"])
    except (FileNotFoundError, OSError, KeyError, ValueError):
        return None
    return checkpoint if checkpoint >= version else None


def first_version_at_or_after(table_uri: str, timestamp_ms: int, storage_options: dict[str, str] | None = None) -> int:
    """The first version committed at or after `timestamp_ms` (the next version if none is yet)."""
    dt = _open(table_uri, None, storage_options)
    if dt is None:
        raise StorageError(f"no Delta table at {table_uri}: write it first (or check the path)")
    versions = sorted((int(h["version"]), int(h.get("timestamp") or 0)) for h in dt.history())
    for version, ts in versions:
        if ts >= timestamp_ms:
            return version
    return int(dt.version()) + 1
