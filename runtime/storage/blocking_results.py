"""Blocking intermediate results as Parquet files, one Delta table per result (dataset).

A batch job's blocking exchange is written to files instead of queues (design card: results live
in Delta, so a consumer restarts without its producer, even when the producer's TaskManager is
gone; Flink keeps them on the producer's TaskManager). Layout:

    <execution.batch.blocking-results.dir>/<job id>/<dataset id>/        one Delta table per result
        subpartition=<k>/part-<producer subtask>-<attempt id>-<uuid>.parquet

Columns: producer_subtask int32, seq int64 (order within the file), payload binary (one stream
element exactly as the data plane frames it: a record batch, a watermark...), plus the partition
column subpartition int32 (from the path). Spark reads a result with
`spark.read.format("delta").load(<job dir>/<dataset id>)`.

A producer writes one file per subpartition it sends anything to; the JobMaster commits them in
one transaction per (result, producer subtask) when the producer FINISHED (`commit_partition`):
the app transaction makes the commit idempotent, so a producer's files are committed once and a
losing attempt's files are never read. Consumers read the committed files, named in their
deployment, on any TaskManager.

pyarrow only here except `commit_partition` / `remove_job_results` (JobMaster side, deltalake).
"""
from __future__ import annotations

import logging
import os
import uuid
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from runtime.core.errors import StorageError
from runtime.rpc.messages import BlockingResultFile
from runtime.storage.state_files import resolve_filesystem

log = logging.getLogger(__name__)

BLOCKING_RESULTS_DIR_KEY = "execution.batch.blocking-results.dir"
PARTITION_COLUMN = "subpartition"
FILE_SCHEMA = pa.schema([("producer_subtask", pa.int32()), ("seq", pa.int64()), ("payload", pa.binary())])
TABLE_SCHEMA = FILE_SCHEMA.append(pa.field(PARTITION_COLUMN, pa.int32()))
# payloads buffered per subpartition before they become a row group; the writer's whole buffer
# stays under _BUFFER_BUDGET (the fullest subpartition is written out first)
_ROW_GROUP_BYTES = 4 << 20
_BUFFER_BUDGET = 32 << 20


def default_results_base() -> str:
    """`execution.batch.blocking-results.dir` when the job sets none: the warehouse's _blocking folder."""
    warehouse = os.environ.get("MILLRACE_WAREHOUSE") or os.path.join(os.getcwd(), "warehouse")
    return os.path.join(warehouse, "_blocking")


def job_results_dir(config: dict[str, str], job_id: str) -> str:
    """Where a job's blocking results live: `<execution.batch.blocking-results.dir>/<job id>`."""
    base = config.get(BLOCKING_RESULTS_DIR_KEY) or default_results_base()
    return f"{base.rstrip('/')}/{job_id}"


def result_table_uri(job_dir: str, dataset_id: str) -> str:
    return f"{job_dir.rstrip('/')}/{dataset_id}"


class _Sub:
    __slots__ = ("index", "rel_path", "writer", "pending", "pending_bytes", "rows", "seq")

    def __init__(self, index: int, rel_path: str) -> None:
        self.index, self.rel_path = index, rel_path
        self.writer: pq.ParquetWriter | None = None
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.rows = 0
        self.seq = 0


class BlockingResultWriter:
    """Writes one producer attempt's subpartitions as files (one per subpartition written to).

    Files are written under hidden temp names and renamed by `close`, so a file under its final
    name is always complete. `abort` removes everything this attempt wrote.
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

    def _sub(self, subpartition: int) -> _Sub:
        sub = self._subs.get(subpartition)
        if sub is None:
            if not 0 <= subpartition < self._num_subpartitions:
                raise StorageError(f"blocking result {self.table_uri}: subpartition {subpartition} out of range 0..{self._num_subpartitions - 1}")
            name = f"part-{self.producer_subtask}-{self.attempt_id}-{uuid.uuid4().hex[:12]}.parquet"
            sub = self._subs[subpartition] = _Sub(subpartition, f"{PARTITION_COLUMN}={subpartition}/{name}")
        return sub

    def _tmp(self, sub: _Sub) -> str:
        d, name = os.path.split(sub.rel_path)
        return f"{self._root}/{d}/.{name}.inprogress"

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
            [pa.array([self.producer_subtask] * n, pa.int32()), pa.array(range(sub.seq, sub.seq + n), pa.int64()), pa.array(sub.pending, pa.binary())],
            schema=FILE_SCHEMA,
        )
        try:
            if sub.writer is None:
                tmp = self._tmp(sub)
                self._fs.create_dir(os.path.dirname(tmp), recursive=True)
                sub.writer = pq.ParquetWriter(tmp, FILE_SCHEMA, filesystem=self._fs, compression="snappy", use_dictionary=False, write_statistics=["producer_subtask", "seq"])
            sub.writer.write_table(table, row_group_size=n)
        except Exception as e:
            raise StorageError(f"writing blocking result file {self._root}/{sub.rel_path} failed: {e}") from e
        self._buffered -= sub.pending_bytes
        self.bytes_written += sub.pending_bytes
        sub.seq += n
        sub.rows += n
        sub.pending, sub.pending_bytes = [], 0

    def close(self) -> list[BlockingResultFile]:
        """Write what is buffered, close and rename every file; the files, by subpartition."""
        if self._closed:
            raise StorageError(f"blocking result writer of {self.table_uri} is already closed")
        out: list[BlockingResultFile] = []
        for sub in sorted(self._subs.values(), key=lambda s: s.index):
            self._flush(sub)
            if sub.writer is None:
                continue
            try:
                sub.writer.close()
                sub.writer = None
                final = f"{self._root}/{sub.rel_path}"
                self._fs.move(self._tmp(sub), final)
                size = self._fs.get_file_info(final).size
            except Exception as e:
                raise StorageError(f"finishing blocking result file {self._root}/{sub.rel_path} failed: {e}") from e
            out.append(BlockingResultFile(path=sub.rel_path, subpartition=sub.index, size=size, rows=sub.rows))
        self._closed = True
        return out

    def abort(self) -> None:
        """Remove every file of this attempt, finished or not (a failed or cancelled producer)."""
        self._closed = True
        for sub in self._subs.values():
            if sub.writer is not None:
                try:
                    sub.writer.close()
                except Exception:  # noqa: BLE001 - it is deleted next
                    pass
                sub.writer = None
            for path in (self._tmp(sub), f"{self._root}/{sub.rel_path}"):
                try:
                    self._fs.delete_file(path)
                except (FileNotFoundError, OSError):
                    pass
        self._buffered = 0


def read_payloads(table_uri: str, rel_path: str) -> Iterator[memoryview]:
    """The payloads of one committed file, in the order they were written (one row group at a time)."""
    fs, root = resolve_filesystem(table_uri)
    path = f"{root}/{rel_path}"
    try:
        f = pq.ParquetFile(path, filesystem=fs)
        for i in range(f.num_row_groups):
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


# --- JobMaster side (Delta) -----------------------------------------------------------------------
def commit_partition(table_uri: str, producer_subtask: int, files: list[BlockingResultFile]) -> bool:
    """Commit one producer subtask's files to the result's table, once: True if this call added them,
    False if that subtask's files were committed before (a replay; nothing added)."""
    from runtime.storage.delta_commit import commit_add_files

    adds = [
        {"path": f.path, "size": f.size, "num_records": f.rows, "partition_values": {PARTITION_COLUMN: str(f.subpartition)},
         "min_values": {"producer_subtask": producer_subtask}, "max_values": {"producer_subtask": producer_subtask}}
        for f in files
    ]
    result = commit_add_files(
        table_uri, adds, TABLE_SCHEMA, partition_by=[PARTITION_COLUMN], app_id=f"producer-{producer_subtask}", version=1,
    )
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
        head, _, name = path.rpartition("/")
        if name.startswith(f"part-{producer_subtask}-"):
            out.append(BlockingResultFile(path=path, subpartition=int(head.split("=", 1)[1]), size=int(size), rows=int(rows or 0)))
    return sorted(out, key=lambda f: (f.subpartition, f.path))
