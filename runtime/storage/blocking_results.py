"""Blocking intermediate results as Parquet files, one Delta table per result (dataset).

A batch job's blocking exchange is written to files instead of queues (design card: results live
in Delta, so a consumer restarts without its producer, even when the producer's TaskManager is
gone; Flink keeps them on the producer's TaskManager). Layout:

    <execution.batch.blocking-results.dir>/<job id>/<dataset id>/        one Delta table per result
        part-<producer subtask>-<attempt id>-<uuid>.parquet              one file per producer attempt

Columns: subpartition int32, producer_subtask int32, seq int64 (order within the subpartition),
payload binary (one stream element exactly as the data plane frames it: a record batch, a
watermark...). Every row group holds rows of ONE subpartition (a subpartition may have several,
in order), so a consumer reads only its row groups; Spark reads a result with
`spark.read.format("delta").load(<job dir>/<dataset id>)` (filter on `subpartition`: row-group
statistics skip the rest).

One file per producer, not per subpartition: a consumer whose parallelism is decided later reads
key-group subpartitions (128 by default), and 128 files per producer cost more than the data.

The JobMaster commits a producer's file in one transaction per (result, producer subtask) when
the producer FINISHED (`commit_partition`): the app transaction makes the commit idempotent, so a
producer's file is committed once and a losing attempt's file is never read. Consumers read the
committed file's row groups of their subpartitions, named in their deployment, on any TaskManager.

pyarrow only here except `commit_partition` / `committed_files` / `committed_partitions` /
`remove_job_results` (JobMaster side, deltalake). `committed_partitions` is what a new leader
JobManager reads to keep the results a batch job committed before the failover (FLIP-383).
"""
from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.core.errors import StorageError
from runtime.core.options import batch as batch_options
from runtime.storage.handles import BlockingResultFile
from runtime.storage.state_files import resolve_filesystem

log = logging.getLogger(__name__)

BLOCKING_RESULTS_DIR_KEY = batch_options.BLOCKING_RESULTS_DIRECTORY.key  # the option's key under its old name
SUBPARTITION_COLUMN = "subpartition"
FILE_SCHEMA = pa.schema([
    (SUBPARTITION_COLUMN, pa.int32()), ("producer_subtask", pa.int32()), ("seq", pa.int64()), ("payload", pa.binary()),
])
TABLE_SCHEMA = FILE_SCHEMA
# payloads buffered per subpartition before they become a row group; the writer's whole buffer
# stays under _BUFFER_BUDGET (the fullest subpartition is written out first)
_ROW_GROUP_BYTES = 4 << 20
PAYLOAD_BYTES_FOOTER_FIELD = "millrace.payload_bytes"  # footer key-value metadata: the payload bytes of the file
_BUFFER_BUDGET = 32 << 20


def default_results_base() -> str:
    """`execution.batch.blocking-results.dir` when the job sets none: the warehouse's _blocking folder."""
    warehouse = os.environ.get("MILLRACE_WAREHOUSE") or os.path.join(os.getcwd(), "warehouse")
    return os.path.join(warehouse, "_blocking")


def job_results_dir(config: Mapping[str, str], job_id: str) -> str:
    """Where a job's blocking results live: `<execution.batch.blocking-results.dir>/<job id>`."""
    base = batch_options.BLOCKING_RESULTS_DIRECTORY.get(config) or default_results_base()
    return f"{base.rstrip('/')}/{job_id}"


def result_table_uri(job_dir: str, dataset_id: str) -> str:
    return f"{job_dir.rstrip('/')}/{dataset_id}"


class _Sub:
    __slots__ = ("index", "pending", "pending_bytes", "seq")

    def __init__(self, index: int) -> None:
        self.index = index
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.seq = 0


class BlockingResultWriter:
    """Writes one producer attempt's subpartitions into one file, a row group per buffered subpartition.

    The file is written under a hidden temp name and renamed by `close`, so a file under its final
    name is always complete. `abort` removes what this attempt wrote.
    """

    def __init__(self, table_uri: str, producer_subtask: int, attempt_id: str, num_subpartitions: int) -> None:
        self.table_uri = table_uri
        self.producer_subtask = producer_subtask
        self.attempt_id = attempt_id
        self._fs, self._root = resolve_filesystem(table_uri)
        self._subs: dict[int, _Sub] = {}
        self._num_subpartitions = num_subpartitions
        self._buffered = 0
        self.bytes_written = 0
        self._closed = False
        self.rel_path = f"part-{producer_subtask}-{attempt_id}-{uuid.uuid4().hex[:12]}.parquet"
        self._tmp = f"{self._root}/.{self.rel_path}.inprogress"
        self._writer: pq.ParquetWriter | None = None
        self._row_groups: dict[int, list[int]] = {}  # subpartition -> its row groups, in order
        self._num_row_groups = 0
        self._rows = 0

    def _sub(self, subpartition: int) -> _Sub:
        sub = self._subs.get(subpartition)
        if sub is None:
            if not 0 <= subpartition < self._num_subpartitions:
                raise StorageError(f"blocking result {self.table_uri}: subpartition {subpartition} out of range 0..{self._num_subpartitions - 1}")
            sub = self._subs[subpartition] = _Sub(subpartition)
        return sub

    def write(self, subpartition: int, payload: bytes) -> None:
        if self._closed:
            raise StorageError(f"blocking result writer of {self.table_uri} is closed")
        sub = self._sub(subpartition)
        sub.pending.append(payload)
        sub.pending_bytes += len(payload)
        self._buffered += len(payload)
        if sub.pending_bytes >= _ROW_GROUP_BYTES:
            self._flush(sub)
        elif self._buffered >= _BUFFER_BUDGET:
            self._flush(max(self._subs.values(), key=lambda s: s.pending_bytes))

    def _flush(self, sub: _Sub) -> None:
        if not sub.pending:
            return
        n = len(sub.pending)
        table = pa.Table.from_arrays(
            [pa.array(np.full(n, sub.index, dtype=np.int32)), pa.array(np.full(n, self.producer_subtask, dtype=np.int32)),
             pa.array(np.arange(sub.seq, sub.seq + n, dtype=np.int64)), pa.array(sub.pending, pa.binary())],
            schema=FILE_SCHEMA,
        )
        try:
            if self._writer is None:
                self._fs.create_dir(self._root, recursive=True)
                self._writer = pq.ParquetWriter(
                    self._tmp, FILE_SCHEMA, filesystem=self._fs, compression="snappy", use_dictionary=False,
                    write_statistics=[SUBPARTITION_COLUMN, "producer_subtask", "seq"],
                )
            self._writer.write_table(table, row_group_size=n)  # one row group: this subpartition's rows
        except Exception as e:
            raise StorageError(f"writing blocking result file {self._root}/{self.rel_path} failed: {e}") from e
        self._row_groups.setdefault(sub.index, []).append(self._num_row_groups)
        self._num_row_groups += 1
        self._buffered -= sub.pending_bytes
        self.bytes_written += sub.pending_bytes
        self._rows += n
        sub.seq += n
        sub.pending, sub.pending_bytes = [], 0

    def close(self) -> list[BlockingResultFile]:
        """Write what is buffered, close and rename the file: the file (none if nothing was written)."""
        if self._closed:
            raise StorageError(f"blocking result writer of {self.table_uri} is already closed")
        for sub in sorted(self._subs.values(), key=lambda s: s.index):
            self._flush(sub)
        self._closed = True
        if self._writer is None:
            return []
        final = f"{self._root}/{self.rel_path}"
        try:
            # the payload bytes in the footer: a JobManager that recovers the committed file (and
            # not this report) still knows the input volume adaptive batch decides from
            self._writer.add_key_value_metadata({PAYLOAD_BYTES_FOOTER_FIELD: str(self.bytes_written)})
            self._writer.close()
            self._writer = None
            self._fs.move(self._tmp, final)
            size = self._fs.get_file_info(final).size
        except Exception as e:
            raise StorageError(f"finishing blocking result file {final} failed: {e}") from e
        return [BlockingResultFile(path=self.rel_path, size=size, rows=self._rows, row_groups=self._row_groups)]

    def abort(self) -> None:
        """Remove this attempt's file, finished or not (a failed or cancelled producer)."""
        self._closed = True
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - it is deleted next
                pass
            self._writer = None
        for path in (self._tmp, f"{self._root}/{self.rel_path}"):
            try:
                self._fs.delete_file(path)
            except (FileNotFoundError, OSError):
                pass
        self._buffered = 0


def read_payloads(table_uri: str, rel_path: str, row_groups: list[int]) -> Iterator[memoryview]:
    """The payloads of some row groups of one committed file (one subpartition's, in write order)."""
    fs, root = resolve_filesystem(table_uri)
    path = f"{root}/{rel_path}"
    try:
        f = pq.ParquetFile(path, filesystem=fs)
        for i in row_groups:
            col = f.read_row_group(i, columns=["payload"]).column(0)
            for chunk in col.chunks:
                # slices of the chunk's data buffer (no copy); its offsets index that buffer directly
                _, offsets_buf, data = chunk.buffers()
                offsets = np.frombuffer(offsets_buf, dtype=np.int32)[chunk.offset:chunk.offset + len(chunk) + 1]
                mv = memoryview(data) if data is not None else memoryview(b"")
                for j in range(len(chunk)):
                    yield mv[offsets[j]:offsets[j + 1]]
    except FileNotFoundError as e:
        raise StorageError(f"blocking result file {path} is missing: the result was removed or never committed") from e


def row_groups_by_subpartition(table_uri: str, rel_path: str) -> dict[int, list[int]]:
    """A written file's row groups per subpartition, from its footer (row-group statistics)."""
    fs, root = resolve_filesystem(table_uri)
    meta = pq.ParquetFile(f"{root}/{rel_path}", filesystem=fs).metadata
    col = meta.schema.names.index(SUBPARTITION_COLUMN)
    out: dict[int, list[int]] = {}
    for i in range(meta.num_row_groups):
        out.setdefault(int(meta.row_group(i).column(col).statistics.min), []).append(i)
    return out


# --- JobMaster side (Delta) -----------------------------------------------------------------------
def commit_partition(table_uri: str, producer_subtask: int, files: list[BlockingResultFile], generation: int = 1) -> bool:
    """Commit one producer subtask's files to the result's table, once per `generation`: True if this
    call added them, False if that subtask's files were committed before (a replay; nothing added).
    A producer re-run because its committed files were lost commits as the next generation."""
    from runtime.storage.delta_commit import commit_add_files

    adds = [
        {"path": f.path, "size": f.size, "num_records": f.rows,
         "min_values": {"producer_subtask": producer_subtask, SUBPARTITION_COLUMN: min(f.row_groups, default=0)},
         "max_values": {"producer_subtask": producer_subtask, SUBPARTITION_COLUMN: max(f.row_groups, default=0)}}
        for f in files
    ]
    result = commit_add_files(table_uri, adds, TABLE_SCHEMA, app_id=f"producer-{producer_subtask}", version=generation)
    return result.committed


def remove_job_results(job_dir: str) -> None:
    """Delete a job's blocking results (every result table) when the job has ended."""
    fs, root = resolve_filesystem(job_dir)
    try:
        if fs.get_file_info(root).type != pafs.FileType.NotFound:
            fs.delete_dir(root)
    except Exception as e:  # noqa: BLE001 - leftovers cost space, not correctness
        log.warning("could not remove blocking results at %s: %s", job_dir, e)


def delete_files(table_uri: str, rel_paths: list[str]) -> None:
    """Delete files no commit references (a producer attempt whose partition was committed before)."""
    fs, root = resolve_filesystem(table_uri)
    for rel in rel_paths:
        try:
            fs.delete_file(f"{root}/{rel}")
        except (FileNotFoundError, OSError):
            pass


def committed_files(table_uri: str, producer_subtask: int) -> list[BlockingResultFile]:
    """The files the result's table holds for one producer subtask (after a JobManager lost track)."""
    from urllib.parse import unquote

    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(table_uri).get_add_actions(flatten=True))
    out = []
    for path, size, rows in zip(*(actions.column(c).to_pylist() for c in ("path", "size_bytes", "num_records"))):
        path = unquote(path)
        if path.rpartition("/")[2].startswith(f"part-{producer_subtask}-"):
            out.append(BlockingResultFile(path=path, size=int(size), rows=int(rows or 0), row_groups=row_groups_by_subpartition(table_uri, path)))
    return sorted(out, key=lambda f: f.path)


@dataclass
class CommittedPartition:
    """What a result's table holds for one producer subtask whose commit landed (its app transaction
    `producer-<i>` is there), read by a JobManager that recovers the job after a failover."""

    producer_subtask: int
    generation: int  # the app transaction's version: a re-run producer commits the next one
    files: list[BlockingResultFile] = field(default_factory=list)
    payload_bytes: int = 0
    lost: bool = False  # its files are gone (deleted or never there): the producer must run again


def _footer(table_uri: str, rel_path: str) -> tuple[dict[int, list[int]], int]:
    """A committed file's row groups per subpartition and its payload bytes, from its footer;
    FileNotFoundError if the file is gone."""
    fs, root = resolve_filesystem(table_uri)
    meta = pq.ParquetFile(f"{root}/{rel_path}", filesystem=fs).metadata
    sub_col, payload_col = meta.schema.names.index(SUBPARTITION_COLUMN), meta.schema.names.index("payload")
    row_groups: dict[int, list[int]] = {}
    estimate = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        row_groups.setdefault(int(rg.column(sub_col).statistics.min), []).append(i)
        estimate += max(0, rg.column(payload_col).total_uncompressed_size - 4 * rg.num_rows)  # PLAIN: 4-byte lengths
    written = (meta.metadata or {}).get(PAYLOAD_BYTES_FOOTER_FIELD.encode())
    return row_groups, int(written) if written is not None else estimate  # a file written before the key existed: an estimate


def committed_partitions(table_uri: str, producer_subtasks: Iterable[int]) -> dict[int, CommittedPartition]:
    """What the result's table holds for each of `producer_subtasks` that committed (absent: it did
    not commit, or the table does not exist). A producer commits one file (none if it wrote nothing)
    per generation, and commits a later generation only after the earlier one's file was found
    missing: its result is the newest of its files that is still there; none there but some
    committed means `lost`."""
    from urllib.parse import unquote

    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        dt = DeltaTable(table_uri)
    except TableNotFoundError:
        return {}
    except Exception as e:
        raise StorageError(f"cannot read the blocking result table {table_uri}: {e}") from e
    generations = {i: v for i in producer_subtasks if (v := dt.transaction_version(f"producer-{i}")) is not None}
    if not generations:
        return {}
    actions = pa.table(dt.get_add_actions(flatten=True))
    adds: dict[int, list[tuple[int, str, int, int]]] = {}
    for path, size, rows, mtime in zip(*(actions.column(c).to_pylist() for c in ("path", "size_bytes", "num_records", "modification_time"))):
        path = unquote(path)
        prefix, _, rest = path.rpartition("/")[2].partition("-")  # part-<producer subtask>-<attempt id>-<uuid>.parquet
        named = rest.partition("-")[0]
        if prefix == "part" and named.isdigit() and int(named) in generations:
            stamp = int(mtime.timestamp() * 1000) if hasattr(mtime, "timestamp") else int(mtime or 0)
            adds.setdefault(int(named), []).append((stamp, path, int(size), int(rows or 0)))
    out = {}
    for subtask, generation in generations.items():
        found = CommittedPartition(subtask, generation)
        for _stamp, path, size, rows in sorted(adds.get(subtask, []), reverse=True):  # newest first
            try:
                row_groups, payload_bytes = _footer(table_uri, path)
            except FileNotFoundError:
                continue  # an earlier generation's lost file
            found.files, found.payload_bytes = [BlockingResultFile(path=path, size=size, rows=rows, row_groups=row_groups)], payload_bytes
            break
        found.lost = bool(adds.get(subtask)) and not found.files
        out[subtask] = found
    return out
