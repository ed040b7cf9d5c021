"""DeltaSource: a bounded source over one version of a Delta table (Flink's FileSource, bounded).

The snapshot (version, schema, data files) is resolved once, when the source is built on the
client, so every subtask and every restarted attempt reads the same version even if the table
is written meanwhile (Flink's split enumerator does this on the JobMaster; with a fixed file list
the enumeration is done up front). Files are the splits: they are dealt to subtasks by size
(largest first, each to the least-loaded subtask), so subtasks get similar amounts of data and a
restarted subtask re-reads exactly its own files.

Records are emitted as ColumnBatches (numpy columns) of at most `batch_size` rows; at the end the
source emits the final watermark like every bounded source.

The position is state: a split is `(file_uri, rows_done)`, a file of the pinned snapshot and how
many of its rows (in file order) were already emitted. A subtask reads its splits in snapshot file
order; a restored one skips each file's `rows_done` first rows (they are read and dropped: Parquet
has no row offsets below the row group), so it goes on exactly where the checkpoint was taken. Reading the files goes through
runtime.storage.delta_read (only storage/ touches the Delta libraries).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from runtime.api.connectors.base import Source, SplitSourceOperator
from runtime.api.operators.base import InputStatus
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, Watermark
from runtime.storage.delta_read import DeltaFile, DeltaSnapshot, iter_file_batches, snapshot

DEFAULT_BATCH_SIZE = 65536


def assign_files(files: Sequence[DeltaFile], parallelism: int) -> list[list[int]]:
    """File indices per subtask: largest file first, each to the subtask with the fewest bytes.

    Deterministic (ties broken by file index, then subtask index), so every attempt of a subtask
    gets the same files.
    """
    loads = [0] * parallelism
    out: list[list[int]] = [[] for _ in range(parallelism)]
    for i in sorted(range(len(files)), key=lambda i: (-files[i].size, i)):
        target = min(range(parallelism), key=lambda s: (loads[s], s))
        out[target].append(i)
        loads[target] += max(1, files[i].size)
    return [sorted(idx) for idx in out]


def arrow_to_columns(batch: Any) -> dict[str, np.ndarray]:
    """numpy columns of a pyarrow RecordBatch (strings and nullable ints become object/float arrays)."""
    cols: dict[str, np.ndarray] = {}
    for name, col in zip(batch.schema.names, batch.columns):
        arr = col.to_numpy(zero_copy_only=False)
        cols[name] = arr if isinstance(arr, np.ndarray) else np.asarray(arr)
    return cols


def _pruned(snap: DeltaSnapshot, partition_filter: dict[str, Any]) -> DeltaSnapshot:
    """The snapshot with only the files whose partition values equal `partition_filter`'s."""
    import dataclasses

    unknown = sorted(set(partition_filter) - set(snap.partition_columns))
    if unknown:
        raise InvalidProgramError(
            f"DeltaSource({snap.table_uri}): partition_filter names {unknown}, which are not partition columns "
            f"(the table is partitioned by {list(snap.partition_columns) or 'nothing'})"
        )
    want = {k: str(v) for k, v in partition_filter.items()}
    files = tuple(f for f in snap.files if all(f.partition_values.get(k) == v for k, v in want.items()))
    return dataclasses.replace(snap, files=files)


def type_info_of(schema: Any) -> Any:
    """Types.ROW_NAMED(...) for an Arrow schema (fields without a Millrace type become PICKLED)."""
    import pyarrow as pa

    from runtime.api.common.typeinfo import Types

    def one(t: Any) -> Any:
        if pa.types.is_int64(t):
            return Types.LONG()
        if pa.types.is_int32(t):
            return Types.INT()
        if pa.types.is_int16(t):
            return Types.SHORT()
        if pa.types.is_int8(t):
            return Types.BYTE()
        if pa.types.is_boolean(t):
            return Types.BOOLEAN()
        if pa.types.is_float32(t):
            return Types.FLOAT()
        if pa.types.is_float64(t):
            return Types.DOUBLE()
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return Types.STRING()
        if pa.types.is_timestamp(t):
            return Types.SQL_TIMESTAMP()
        if pa.types.is_date32(t):
            return Types.SQL_DATE()
        return Types.PICKLED_BYTE_ARRAY()

    return Types.ROW_NAMED(list(schema.names), [one(f.type) for f in schema])


class DeltaSourceOperator(SplitSourceOperator):
    def __init__(self, source: DeltaSource) -> None:
        super().__init__()
        self.source = source
        self._splits: list[list[Any]] = []  # [file uri, rows done], in snapshot file order
        self._batches: Iterator[Any] | None = None  # the open reader of self._splits[0]
        self._files = {f.uri: f for f in source.snapshot.files}

    def initial_splits(self) -> list[tuple[str, int]]:
        assert self.ctx is not None
        files = self.source.snapshot.files
        mine = assign_files(files, self.ctx.parallelism)[self.ctx.subtask_index]
        return [(files[i].uri, 0) for i in mine]

    def add_splits(self, splits: list[Any]) -> None:
        s = self.source
        order = {f.uri: i for i, f in enumerate(s.snapshot.files)}
        for x in splits:
            if not (isinstance(x, (tuple, list)) and len(x) == 2 and isinstance(x[0], str) and isinstance(x[1], int) and x[1] >= 0):
                raise InvalidProgramError(
                    f"{self.describe()}: restored split {x!r} is not a DeltaSource split (file_uri, rows_done); the checkpoint "
                    "belongs to another source under the same uid: give this source its own uid or start without the checkpoint"
                )
            if x[0] not in order:
                raise InvalidProgramError(
                    f"{self.describe()}: the checkpoint reads file {x[0]} of {s.path}, which is not in version {s.snapshot_version} "
                    "that this source pinned; restore with the table version the checkpointed job read "
                    "(DeltaSource.for_path(path, version=...)) or start without the checkpoint"
                )
            self._splits.append([x[0], int(x[1])])
        self._splits.sort(key=lambda sp: order[sp[0]])

    def snapshot_splits(self) -> list[tuple[str, int]]:
        return [(uri, done) for uri, done in self._splits]

    def _read(self, file: DeltaFile, skip: int) -> Iterator[Any]:
        s = self.source
        batches = iter_file_batches(file, s.snapshot.schema, s.columns, s.batch_size, s.storage_options)
        try:
            for rb in batches:
                if skip >= rb.num_rows:
                    skip -= rb.num_rows
                    continue
                if skip:
                    rb, skip = rb.slice(skip), 0
                yield rb
        finally:
            batches.close()  # type: ignore[attr-defined]  # a generator; iter_file_batches (runtime/storage) says Iterator

    def emit_next(self) -> InputStatus:
        assert self.output is not None
        while self._splits:
            split = self._splits[0]
            if self._batches is None:
                self._batches = self._read(self._files[split[0]], split[1])
            rb = next(self._batches, None)
            if rb is None:
                self._close_reader()
                self._splits.pop(0)
                continue
            if rb.num_rows == 0:
                continue
            self.output.emit(ColumnBatch(arrow_to_columns(rb)))
            split[1] += rb.num_rows
            return InputStatus.MORE_AVAILABLE
        self.output.emit_watermark(Watermark(MAX_TIMESTAMP))
        return InputStatus.END_OF_INPUT

    def _close_reader(self) -> None:
        close = getattr(self._batches, "close", None)
        self._batches = None
        if close is not None:
            close()  # closes the open Parquet file of a cancelled read

    def close(self) -> None:
        self._close_reader()
        super().close()


class DeltaSource(Source):
    """`DeltaSource.for_path(path, version=None, columns=None, partition_filter=None)`: the rows of one table version.

    `version=None` reads the newest version at the time the source is built; `snapshot_version`
    tells which one that was (e.g. for a Dagster materialization's lineage). `partition_filter`
    ({"day": "2026-01-03"}) reads only the files of those partition values (partition pruning).
    """

    def __init__(
        self,
        path: str,
        version: int | None = None,
        columns: Sequence[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        storage_options: dict[str, str] | None = None,
        partition_filter: dict[str, Any] | None = None,
    ) -> None:
        if batch_size < 1:
            raise InvalidProgramError(f"DeltaSource({path}): batch_size must be >= 1, got {batch_size}")
        self.path = path
        self.columns = list(columns) if columns else None
        self.batch_size = int(batch_size)
        self.storage_options = storage_options
        try:
            self.snapshot: DeltaSnapshot = snapshot(path, version, storage_options)
        except Exception as e:  # a program error at build time, not a task failure
            raise InvalidProgramError(f"DeltaSource: cannot read the Delta table at {path}: {e}") from e
        if partition_filter:
            self.snapshot = _pruned(self.snapshot, partition_filter)
        if self.columns:
            unknown = [c for c in self.columns if c not in self.snapshot.schema.names]
            if unknown:
                raise InvalidProgramError(
                    f"DeltaSource({path}): column(s) {unknown} are not in the table; it has {self.snapshot.schema.names}"
                )

    @staticmethod
    def for_path(path: str, version: int | None = None, columns: Sequence[str] | None = None, **kwargs: Any) -> DeltaSource:
        return DeltaSource(path, version=version, columns=columns, **kwargs)

    @property
    def snapshot_version(self) -> int:
        return self.snapshot.version

    @property
    def schema(self) -> Any:
        """The pyarrow schema of the emitted records."""
        import pyarrow as pa

        s = self.snapshot.schema
        return s if not self.columns else pa.schema([s.field(c) for c in self.columns])

    def create_operator(self) -> DeltaSourceOperator:
        return DeltaSourceOperator(self)

    def max_parallelism(self) -> int | None:
        # a subtask without files would only emit the final watermark; allow it anyway (p > files is legal)
        return None

    def get_type_info(self) -> Any:
        return type_info_of(self.schema)
