"""DeltaSource: a FLIP-27 source over a Delta table, bounded (one version) or continuous (following its commits).

Bounded (`DeltaSource.for_path(path, version=None)`): the snapshot (version, schema, data files)
is resolved once, when the source is built on the client, so every subtask and every restarted
attempt reads the same version even if the table is written meanwhile.

Continuous (`DeltaSource.for_table(path).continuous(discovery_interval).build()`): like Spark's
Delta streaming source, it reads the table's snapshot at the start (or, from a starting version or
timestamp, the commits from there on) and then every new commit in version order. The enumerator
(on the JobMaster) reads each new commit's log entry every `discovery_interval` and hands the
files it adds to readers as they ask. A commit that removes data (DELETE, an overwrite, a MERGE)
fails the job naming its version, unless `ignore_deletes()` (commits that only remove files are
skipped) or `ignore_changes()` (files rewritten by an UPDATE/MERGE are read again: their unchanged
rows come twice) is set; a schema change fails the job. Commits with only `dataChange: false`
(OPTIMIZE, compaction) change no data and are skipped.

Splits are data files (`DeltaSplit`: the version that added it, its index there, `rows_done`).
The enumerator's checkpoint holds the next version to read and the files discovered but not yet
handed out; a reader's holds its unfinished files with how many rows of each it emitted (a
restored reader skips those: Parquet has no row offsets below the row group). Together they are
exactly-once positions (version, file, row). Records are ColumnBatches of at most `batch_size`
rows; event time comes from a column through the watermark strategy's timestamp assigner
(`TimestampAssigner.from_field("ts")`), per file. Reading goes through runtime.storage.delta_read
(only storage/ touches the Delta libraries).
"""
from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.api.connectors.base import Source
from runtime.api.connectors.source.api import Boundedness, SourceReaderBase, SourceReaderContext, SplitEnumerator, SplitEnumeratorContext
from runtime.core.errors import InvalidProgramError, NonRecoverableError
from runtime.core.records import ColumnBatch
from runtime.core.time import Duration
from runtime.storage.delta_read import (
    DeltaCommit,
    DeltaFile,
    DeltaSnapshot,
    first_version_at_or_after,
    iter_file_batches,
    log_moved_past,
    read_commit,
    snapshot,
)

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 65536


def arrow_to_columns(batch: Any) -> dict[str, np.ndarray]:
    """numpy columns of a pyarrow RecordBatch (strings and nullable ints become object/float arrays)."""
    cols: dict[str, np.ndarray] = {}
    for name, col in zip(batch.schema.names, batch.columns):
        arr = col.to_numpy(zero_copy_only=False)
        cols[name] = arr if isinstance(arr, np.ndarray) else np.asarray(arr)
    return cols


def _pruned(snap: DeltaSnapshot, partition_filter: dict[str, Any]) -> DeltaSnapshot:
    """The snapshot with only the files whose partition values equal `partition_filter`'s."""
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


DEFAULT_DISCOVERY_INTERVAL_MS = 1000
MAX_COMMITS_PER_DISCOVERY = 1000  # a discovery that is far behind catches up in steps of this many commits


class DeltaTableChangeError(NonRecoverableError):
    """The followed table changed in a way the continuous source does not read through (a delete,
    a rewrite, a schema change): restarting would meet the same commit, so the job fails at once."""


@dataclass(frozen=True)
class DeltaSplit:
    """One data file to read: `version` added it (the snapshot's version for the initial files),
    it is file `index` of that version, and `rows_done` of its rows were emitted."""

    version: int
    index: int
    uri: str
    size: int
    partition_values: dict[str, Any] = field(default_factory=dict, hash=False)
    rows_done: int = 0

    @property
    def split_id(self) -> str:
        return f"{self.version}-{self.index}"

    def file(self) -> DeltaFile:
        return DeltaFile(self.uri, self.size, None, self.partition_values)


def _splits_of(version: int, files: Sequence[DeltaFile]) -> list[DeltaSplit]:
    return [DeltaSplit(version, i, f.uri, f.size, dict(f.partition_values)) for i, f in enumerate(files)]


@dataclass
class DeltaEnumeratorState:
    """The enumerator's checkpoint: files discovered and not handed out, and the next commit to read
    (None: bounded, nothing more to discover)."""

    pending: list[DeltaSplit]
    next_version: int | None


class DeltaSplitEnumerator(SplitEnumerator[DeltaSplit, DeltaEnumeratorState]):
    def __init__(self, context: SplitEnumeratorContext[DeltaSplit], source: DeltaSource, state: DeltaEnumeratorState) -> None:
        self.context = context
        self.source = source
        self.pending = sorted(state.pending, key=lambda s: (s.version, s.index))
        self.next_version = state.next_version
        self.awaiting: list[int] = []  # readers that asked while nothing was pending (continuous)

    def start(self) -> None:
        if self.next_version is not None:
            period = self.source.discovery_interval_ms / 1000.0
            self.context.call_async(self._discover, self._on_discovered, 0.0, period)

    # --- discovery (off the coordinator's thread) and its result (on it) -------------------------------
    def _discover(self) -> tuple[int, list[DeltaCommit]]:
        assert self.next_version is not None
        first = version = self.next_version
        commits: list[DeltaCommit] = []
        s = self.source
        while len(commits) < MAX_COMMITS_PER_DISCOVERY:
            commit = read_commit(s.path, version, s.snapshot.partition_columns, s.storage_options)
            if commit is None:
                break
            commits.append(commit)
            version += 1
        if not commits:
            # commit `first` is not there: not yet (the usual case), or cleaned up from the log
            newer = log_moved_past(s.path, first, s.storage_options)
            if newer is not None:
                raise DeltaTableChangeError(
                    f"DeltaSource({s.path}): commit {first} is no longer in the table's log (version {newer} is); "
                    "its log was cleaned up before this job read it. Restart the job from a newer starting version"
                )
        return first, commits

    def _on_discovered(self, result: tuple[int, list[DeltaCommit]] | None, error: BaseException | None) -> None:
        if error is not None:
            if isinstance(error, NonRecoverableError):
                raise error
            log.warning("DeltaSource(%s): reading the table's log failed (tried again in %d ms): %s",
                        self.source.path, self.source.discovery_interval_ms, error)
            return
        assert result is not None
        first, commits = result
        if first != self.next_version:
            return  # the enumerator moved on meanwhile (a checkpoint restore replaces it: never here)
        for commit in commits:
            self.pending.extend(self._splits_of_commit(commit))
            self.next_version = commit.version + 1
        if commits:
            log.debug("DeltaSource(%s): %d new commit(s) up to version %d", self.source.path, len(commits), commits[-1].version)
        self._assign_awaiting()

    def _splits_of_commit(self, commit: DeltaCommit) -> list[DeltaSplit]:
        s = self.source
        if commit.schema is not None and not commit.schema.equals(s.snapshot.schema):
            raise DeltaTableChangeError(
                f"DeltaSource({s.path}): version {commit.version} ({commit.operation or 'a commit'}) changed the table's schema "
                f"from [{_describe(s.snapshot.schema)}] to [{_describe(commit.schema)}]; a continuous source reads one schema. "
                "Restart the job (with a new starting version) to read the new schema"
            )
        if commit.removed:
            rewrites = bool(commit.added)
            if rewrites and not s.ignore_changes_:
                raise DeltaTableChangeError(
                    f"DeltaSource({s.path}): version {commit.version} ({commit.operation or 'a commit'}) rewrote data: it removed "
                    f"{len(commit.removed)} file(s) and added {len(commit.added)}. A continuous Delta source reads appends only; "
                    "set ignore_changes() to read the rewritten files again (their unchanged rows come twice), "
                    "or restart the job from a version after this one"
                )
            if not rewrites and not (s.ignore_deletes_ or s.ignore_changes_):
                raise DeltaTableChangeError(
                    f"DeltaSource({s.path}): version {commit.version} ({commit.operation or 'a commit'}) deleted data: it removed "
                    f"{len(commit.removed)} file(s). A continuous Delta source reads appends only; set ignore_deletes() to skip "
                    "commits that only delete, or restart the job from a version after this one"
                )
        files = list(commit.added)
        if s.partition_filter:
            want = {k: str(v) for k, v in s.partition_filter.items()}
            files = [f for f in files if all(str(f.partition_values.get(k)) == v for k, v in want.items())]
        return _splits_of(commit.version, files)

    # --- readers --------------------------------------------------------------------------------------
    def handle_split_request(self, subtask: int, requester_hostname: str | None) -> None:
        if subtask not in self.context.registered_readers():
            return  # its attempt failed meanwhile; the next one asks again
        if self.pending:
            self.context.assign_split(self.pending.pop(0), subtask)
        elif self.next_version is None:
            self.context.signal_no_more_splits(subtask)
        elif subtask not in self.awaiting:
            self.awaiting.append(subtask)

    def _assign_awaiting(self) -> None:
        readers = self.context.registered_readers()
        while self.pending and self.awaiting:
            subtask = self.awaiting.pop(0)
            if subtask in readers:
                self.context.assign_split(self.pending.pop(0), subtask)

    def add_splits_back(self, splits: list[DeltaSplit], subtask: int) -> None:
        self.pending = sorted(self.pending + list(splits), key=lambda s: (s.version, s.index))
        self._assign_awaiting()

    def add_reader(self, subtask: int) -> None:
        pass  # a reader asks for work itself

    def snapshot_state(self, checkpoint_id: int) -> DeltaEnumeratorState:
        return DeltaEnumeratorState(list(self.pending), self.next_version)


def _describe(schema: Any) -> str:
    return ", ".join(f"{f.name}: {f.type}" for f in schema)


class DeltaSourceReader(SourceReaderBase[DeltaSplit]):
    """Reads one file at a time, in the order handed out; a restored file skips its `rows_done` rows."""

    def __init__(self, context: SourceReaderContext, source: DeltaSource) -> None:
        super().__init__(context)
        self.source = source
        self._batches: Iterator[Any] | None = None
        self._reading: str | None = None  # split id of the open file

    def add_splits(self, splits: list[DeltaSplit]) -> None:
        for x in splits:
            if not isinstance(x, DeltaSplit):
                raise InvalidProgramError(
                    f"DeltaSource({self.source.path}): restored split {x!r} is not a DeltaSource split; the checkpoint belongs to "
                    "another source under the same uid: give this source its own uid or start without the checkpoint"
                )
        super().add_splits(splits)

    def _open(self, split: DeltaSplit) -> Iterator[Any]:
        s = self.source
        skip = split.rows_done
        batches = iter_file_batches(split.file(), s.snapshot.schema, s.columns, s.batch_size, s.storage_options)
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

    def read_next(self, split: DeltaSplit) -> tuple[ColumnBatch, DeltaSplit] | None:
        if self._reading != split.split_id:
            self._close_file()
            self._batches, self._reading = self._open(split), split.split_id
        assert self._batches is not None
        rb = next(self._batches, None)
        if rb is None:
            return None
        return ColumnBatch(arrow_to_columns(rb)), dataclasses.replace(split, rows_done=split.rows_done + rb.num_rows)

    def finish_split(self, split: DeltaSplit) -> None:
        self._close_file()

    def _close_file(self) -> None:
        close = getattr(self._batches, "close", None)
        self._batches, self._reading = None, None
        if close is not None:
            close()  # closes the open Parquet file of a cancelled read

    def close(self) -> None:
        self._close_file()


class DeltaSource(Source):
    """`DeltaSource.for_path(path, version=None, columns=None, partition_filter=None)`: the rows of one table version.

    `version=None` reads the newest version at the time the source is built; `snapshot_version`
    tells which one that was (e.g. for a Dagster materialization's lineage). `partition_filter`
    ({"day": "2026-01-03"}) reads only the files of those partition values (partition pruning).
    `DeltaSource.for_table(path)` is the builder, for a continuous source too.
    """

    def __init__(
        self,
        path: str,
        version: int | None = None,
        columns: Sequence[str] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        storage_options: dict[str, str] | None = None,
        partition_filter: dict[str, Any] | None = None,
        continuous: bool = False,
        discovery_interval_ms: int = DEFAULT_DISCOVERY_INTERVAL_MS,
        starting_version: int | str | None = None,
        starting_timestamp_ms: int | None = None,
        ignore_deletes: bool = False,
        ignore_changes: bool = False,
    ) -> None:
        if batch_size < 1:
            raise InvalidProgramError(f"DeltaSource({path}): batch_size must be >= 1, got {batch_size}")
        if discovery_interval_ms < 1:
            raise InvalidProgramError(f"DeltaSource({path}): the discovery interval must be at least 1 ms, got {discovery_interval_ms}")
        if not continuous and (starting_version is not None or starting_timestamp_ms is not None or ignore_deletes or ignore_changes):
            raise InvalidProgramError(
                f"DeltaSource({path}): starting_version, starting_timestamp, ignore_deletes and ignore_changes are options of a "
                "continuous source; call continuous(...) too, or read one version with version=..."
            )
        if continuous and version is not None:
            raise InvalidProgramError(f"DeltaSource({path}): a continuous source follows new versions; use starting_version, not version")
        if starting_version is not None and starting_timestamp_ms is not None:
            raise InvalidProgramError(f"DeltaSource({path}): give a starting version or a starting timestamp, not both")
        if isinstance(starting_version, str) and starting_version != "latest":
            raise InvalidProgramError(f"DeltaSource({path}): starting_version is a version number or 'latest', got {starting_version!r}")
        if isinstance(starting_version, int) and starting_version < 0:
            raise InvalidProgramError(f"DeltaSource({path}): starting_version must be >= 0, got {starting_version}")
        self.path = path
        self.columns = list(columns) if columns else None
        self.batch_size = int(batch_size)
        self.storage_options = storage_options
        self.partition_filter = dict(partition_filter) if partition_filter else None
        self.continuous = continuous
        self.discovery_interval_ms = int(discovery_interval_ms)
        self.ignore_deletes_ = ignore_deletes
        self.ignore_changes_ = ignore_changes
        try:
            self.snapshot: DeltaSnapshot = snapshot(path, version, storage_options)
        except Exception as e:  # a program error at build time, not a task failure
            raise InvalidProgramError(f"DeltaSource: cannot read the Delta table at {path}: {e}") from e
        if self.partition_filter:
            self.snapshot = _pruned(self.snapshot, self.partition_filter)
        if self.columns:
            unknown = [c for c in self.columns if c not in self.snapshot.schema.names]
            if unknown:
                raise InvalidProgramError(
                    f"DeltaSource({path}): column(s) {unknown} are not in the table; it has {self.snapshot.schema.names}"
                )
        # where a continuous source starts: the initial snapshot's files and the first commit after them
        self.initial_files: tuple[DeltaFile, ...] = self.snapshot.files
        self.first_version: int | None = None
        if continuous:
            if starting_timestamp_ms is not None:
                starting_version = first_version_at_or_after(path, starting_timestamp_ms, storage_options)
            if starting_version == "latest":
                self.initial_files, self.first_version = (), self.snapshot.version + 1
            elif isinstance(starting_version, int):
                if starting_version > self.snapshot.version + 1:
                    raise InvalidProgramError(
                        f"DeltaSource({path}): starting_version {starting_version} is beyond the table's next version "
                        f"{self.snapshot.version + 1}"
                    )
                self.initial_files, self.first_version = (), starting_version
            else:
                self.first_version = self.snapshot.version + 1

    @staticmethod
    def for_path(path: str, version: int | None = None, columns: Sequence[str] | None = None, **kwargs: Any) -> DeltaSource:
        return DeltaSource(path, version=version, columns=columns, **kwargs)

    @staticmethod
    def for_table(path: str) -> DeltaSourceBuilder:
        return DeltaSourceBuilder(path)

    @property
    def snapshot_version(self) -> int:
        return self.snapshot.version

    @property
    def schema(self) -> Any:
        """The pyarrow schema of the emitted records."""
        import pyarrow as pa

        s = self.snapshot.schema
        return s if not self.columns else pa.schema([s.field(c) for c in self.columns])

    def get_boundedness(self) -> Boundedness:
        return Boundedness.CONTINUOUS_UNBOUNDED if self.continuous else Boundedness.BOUNDED

    def initial_state(self) -> DeltaEnumeratorState:
        return DeltaEnumeratorState(_splits_of(self.snapshot.version, self.initial_files), self.first_version)

    def create_enumerator(self, context: SplitEnumeratorContext[DeltaSplit]) -> DeltaSplitEnumerator:
        return DeltaSplitEnumerator(context, self, self.initial_state())

    def restore_enumerator(self, context: SplitEnumeratorContext[DeltaSplit], checkpoint: Any) -> DeltaSplitEnumerator:
        if not isinstance(checkpoint, DeltaEnumeratorState):
            raise InvalidProgramError(
                f"DeltaSource({self.path}): the checkpoint's enumerator state is a {type(checkpoint).__name__}, not a DeltaSource's; "
                "it belongs to another source under the same uid: give this source its own uid or start without the checkpoint"
            )
        if self.continuous != (checkpoint.next_version is not None):
            raise InvalidProgramError(
                f"DeltaSource({self.path}): the checkpoint was taken by a {'bounded' if self.continuous else 'continuous'} source "
                f"and this one is {'continuous' if self.continuous else 'bounded'}; restore with the same kind of source"
            )
        return DeltaSplitEnumerator(context, self, checkpoint)

    def create_reader(self, context: SourceReaderContext) -> DeltaSourceReader:
        return DeltaSourceReader(context, self)

    def get_type_info(self) -> Any:
        return type_info_of(self.schema)


class DeltaSourceBuilder:
    """`DeltaSource.for_table(path).columns([...]).continuous(Duration.of_seconds(1)).starting_version(3).build()`."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._kw: dict[str, Any] = {}

    def version(self, version: int) -> DeltaSourceBuilder:
        """Bounded: read this version (default: the newest when built)."""
        self._kw["version"] = version
        return self

    def columns(self, columns: Sequence[str]) -> DeltaSourceBuilder:
        self._kw["columns"] = list(columns)
        return self

    def partition_filter(self, partition_filter: dict[str, Any]) -> DeltaSourceBuilder:
        self._kw["partition_filter"] = dict(partition_filter)
        return self

    def batch_size(self, batch_size: int) -> DeltaSourceBuilder:
        self._kw["batch_size"] = batch_size
        return self

    def storage_options(self, options: dict[str, str]) -> DeltaSourceBuilder:
        self._kw["storage_options"] = dict(options)
        return self

    def continuous(self, discovery_interval: Duration | int = DEFAULT_DISCOVERY_INTERVAL_MS) -> DeltaSourceBuilder:
        """Follow new commits, looking for them every `discovery_interval` (a Duration, or ms)."""
        self._kw["continuous"] = True
        self._kw["discovery_interval_ms"] = discovery_interval.to_milliseconds() if isinstance(discovery_interval, Duration) else int(discovery_interval)
        return self

    def starting_version(self, version: int | str) -> DeltaSourceBuilder:
        """Read the commits from `version` on (no initial snapshot); 'latest': only commits after the current version."""
        self._kw["starting_version"] = version
        return self

    def starting_from_latest(self) -> DeltaSourceBuilder:
        return self.starting_version("latest")

    def starting_timestamp(self, timestamp_ms: int) -> DeltaSourceBuilder:
        """Read the commits made at or after `timestamp_ms` (epoch ms)."""
        self._kw["starting_timestamp_ms"] = int(timestamp_ms)
        return self

    def ignore_deletes(self) -> DeltaSourceBuilder:
        self._kw["ignore_deletes"] = True
        return self

    def ignore_changes(self) -> DeltaSourceBuilder:
        self._kw["ignore_changes"] = True
        return self

    def build(self) -> DeltaSource:
        return DeltaSource(self._path, **self._kw)
