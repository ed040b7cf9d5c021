"""A job's completed checkpoints: ONE Delta table, partitioned by `checkpoint_id` (delta-rs).

A checkpoint exists if and only if its commit exists: tasks write their state files (see
`runtime.storage.state_files`) into `<table>/checkpoint_id=<id>/`, and `CheckpointStore.commit`
adds all of them plus one metadata file (a single 'meta' row holding `CheckpointMetadata` as JSON)
in ONE Delta commit, carrying the app transaction (f"millrace-checkpoints-{job_id}", checkpoint_id)
so a replayed commit is skipped. Retention removes subsumed checkpoints with a partition-only Delta
delete (metadata-only: delta-rs removes whole files and rewrites none) and then deletes their files.

Only storage/ imports deltalake; it is imported lazily so merely importing this module is cheap.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.errors import ConfigurationError, CorruptStateError, SharedStateMissingError, StorageError
from runtime.storage.delta_commit import CommitOutcomeUnknownError, commit_add_files
from runtime.storage.handles import StateFileHandle
from runtime.storage.state_files import (
    CHECKPOINT_TABLE_SCHEMA,
    KIND_META,
    META_OPERATOR_ID,
    PARTITION_COLUMN,
    checkpoint_of_path,
    is_metadata_file,
    partition_dir,
    read_metadata,
    resolve_filesystem,
    write_metadata_file,
)

log = logging.getLogger(__name__)

# delta-rs's post-commit hook already writes a log checkpoint every `delta.checkpointInterval`
# (default 100) versions; we also do it explicitly so the log stays short even if that is disabled
LOG_CHECKPOINT_INTERVAL = 100


class CheckpointMetadata(BaseModel):
    """What the JobMaster knows about a completed checkpoint; stored as JSON in its 'meta' row."""

    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", extra="forbid")

    job_id: str
    checkpoint_id: int
    timestamp_ms: int
    completed_ms: int = 0
    is_savepoint: bool = False
    files: list[StateFileHandle]  # every task state file (paths relative to the table root)
    # files of earlier checkpoints this one's state builds on (incremental checkpoints; Flink's
    # shared state): they stay in the table while a retained checkpoint lists them
    shared_files: list[str] = Field(default_factory=list)
    operator_files: dict[str, list[str]]  # operator_id -> files that hold rows of that operator
    committables: dict[str, list[bytes]]  # operator_id -> per subtask (subtask order) pickled committables
    parallelism: dict[str, int] = Field(default_factory=dict)  # operator_id -> parallelism when written
    max_parallelism: dict[str, int] = Field(default_factory=dict)  # operator_id -> max parallelism (key groups)
    # FLIP-147: operator_id -> the subtasks that had finished (all of them: the operator is fully
    # finished); a restore deploys those as finished instead of running them again
    finished_subtasks: dict[str, list[int]] = Field(default_factory=dict)
    # operator_id -> its operator coordinator's state (a source's split enumerator), taken before the tasks'
    coordinator_states: dict[str, bytes] = Field(default_factory=dict)
    state_size: int = 0
    duration_ms: int = 0
    location: str | None = None  # a savepoint's table (the path `run -s` takes); None for a checkpoint


_CHECKPOINT_COLUMNS = ("operator_id", "kind", "state_name")  # a few of CHECKPOINT_TABLE_SCHEMA's, enough to tell


def check_checkpoint_table(table_uri: str, dt: Any) -> None:
    """Refuse a Delta table that is not a checkpoint or savepoint table (an output table, say)
    before anything reads it as one, saying what it is and what was expected."""
    partitions = list(dt.metadata().partition_columns)
    columns = [f.name for f in dt.schema().fields]
    missing = [c for c in (PARTITION_COLUMN, *_CHECKPOINT_COLUMNS) if c not in columns]
    if partitions == [PARTITION_COLUMN] and not missing:
        return
    shown = ", ".join(columns[:8]) + (f", ... ({len(columns)} columns)" if len(columns) > 8 else "")
    raise CorruptStateError(
        f"{table_uri} is a Delta table but not a savepoint or checkpoint: it has the columns [{shown}]"
        f"{f' and is partitioned by {partitions}' if partitions else ' and no partitions'}, where a savepoint or checkpoint "
        f"table is partitioned by {PARTITION_COLUMN!r} and has the columns {', '.join(_CHECKPOINT_COLUMNS)}, ... "
        "(an output table?). Restore from a savepoint location (`millrace savepoint` / `millrace stop` print it: "
        ".../savepoint-<job>-<id>) or from a job's retained checkpoint table (<state.checkpoints.dir>/<job id>)."
    )


class CheckpointStore:
    """The checkpoint Delta table of one job (Flink: CompletedCheckpointStore + CheckpointStorage).

    Not thread-safe: `commit`, `discard` and the readers are called from one thread per job (the
    JobMaster's checkpoint I/O executor), and only one JobMaster writes a job's table at a time;
    the app transaction id makes a commit replayed after a fail-over harmless.
    """

    def __init__(self, table_uri: str, job_id: str, num_retained: int = 1, storage_options: dict[str, str] | None = None) -> None:
        if num_retained < 1:
            raise ConfigurationError(
                f"job {job_id}: state.checkpoints.num-retained must be at least 1, got {num_retained}"
            )
        self.table_uri = table_uri.rstrip("/")
        self.job_id = job_id
        self.num_retained = num_retained
        self.storage_options = storage_options
        self.app_id = f"millrace-checkpoints-{job_id}"
        self._dt: Any = None  # cached deltalake.DeltaTable, brought up to date before each use
        self._metadata_cache: dict[str, CheckpointMetadata] = {}  # meta file path -> metadata (files are immutable)

    # --- Delta table access ----------------------------------------------------------------
    def _table(self) -> Any:
        """The up-to-date DeltaTable, or None if no checkpoint was ever committed."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            if self._dt is None:
                dt = DeltaTable(self.table_uri, storage_options=self.storage_options)
                check_checkpoint_table(self.table_uri, dt)
                self._dt = dt
            else:
                self._dt.update_incremental()
        except TableNotFoundError:
            self._dt = None
        except CorruptStateError:
            raise
        except Exception as e:  # unreadable log, permissions, ...
            raise StorageError(f"job {self.job_id}: cannot read the checkpoint table {self.table_uri}: {e}") from e
        return self._dt

    def _files_by_checkpoint(self, dt: Any) -> dict[int, list[str]]:
        """checkpoint_id -> table-relative paths of its live files, from the Delta log only."""
        import pyarrow as pa

        actions = pa.table(dt.get_add_actions(flatten=True))
        out: dict[int, list[str]] = {}
        if actions.num_rows == 0:
            return out
        ids = actions.column(f"partition.{PARTITION_COLUMN}").to_pylist()
        for path, cid in zip(actions.column("path").to_pylist(), ids):
            out.setdefault(int(cid), []).append(path)
        return out

    def _metas(self, dt: Any) -> dict[int, str]:
        """checkpoint_id -> path of its metadata file (every committed checkpoint has exactly one)."""
        metas: dict[int, str] = {}
        for cid, paths in self._files_by_checkpoint(dt).items():
            found = [p for p in paths if is_metadata_file(p)]
            if found:
                metas[cid] = found[0]
        return metas

    def _read_meta(self, rel_path: str) -> CheckpointMetadata:
        meta = self._metadata_cache.get(rel_path)
        if meta is None:
            payload = read_metadata(f"{self.table_uri}/{rel_path}")
            try:
                meta = CheckpointMetadata.model_validate_json(payload)
            except Exception as e:  # pydantic ValidationError, bad JSON
                raise StorageError(f"job {self.job_id}: checkpoint metadata {self.table_uri}/{rel_path} is not valid: {e}") from e
            self._metadata_cache[rel_path] = meta
        return meta

    # --- readers -----------------------------------------------------------------------------
    def completed_ids(self) -> list[int]:
        """Ids of every checkpoint and savepoint in the table, oldest first."""
        dt = self._table()
        return [] if dt is None else sorted(self._metas(dt))

    def get(self, checkpoint_id: int) -> CheckpointMetadata | None:
        dt = self._table()
        if dt is None:
            return None
        path = self._metas(dt).get(int(checkpoint_id))
        return None if path is None else self._read_meta(path)

    def latest(self, include_savepoints: bool = True) -> CheckpointMetadata | None:
        """The newest completed checkpoint (savepoints included unless told otherwise); None if there is none.

        Reads the Delta log and the newest metadata file only, never the task state files.
        """
        dt = self._table()
        if dt is None:
            return None
        metas = self._metas(dt)
        for cid in sorted(metas, reverse=True):
            meta = self._read_meta(metas[cid])
            if include_savepoints or not meta.is_savepoint:
                return meta
        return None

    # --- commit ------------------------------------------------------------------------------
    def _check(self, m: CheckpointMetadata) -> None:
        where = f"job {self.job_id}, checkpoint {m.checkpoint_id}"
        if m.job_id != self.job_id:
            raise StorageError(f"{where}: metadata is of job {m.job_id!r}; this store keeps job {self.job_id!r}'s checkpoints")
        paths = {f.path for f in m.files}
        for p in paths | set(m.shared_files):
            if p.startswith("/") or "://" in p or ".." in p.split("/"):
                raise StorageError(f"{where}: state file path {p!r} must be relative to the checkpoint table root {self.table_uri}")
        own = partition_dir(m.checkpoint_id) + "/"
        for p in m.shared_files:
            if p.startswith(own) or checkpoint_of_path(p) is None:
                raise StorageError(f"{where}: shared state file {p!r} is not a file of an earlier checkpoint")
        paths |= set(m.shared_files)
        for op, files in m.operator_files.items():
            unknown = [p for p in files if p not in paths]
            if unknown:
                raise StorageError(f"{where}: operator {op!r} names state file {unknown[0]!r}, which is not among the checkpoint's files")

    def commit(self, metadata: CheckpointMetadata) -> int:
        """Complete a checkpoint: one Delta commit of its files and metadata. Returns the Delta version.

        A commit whose checkpoint id is not newer than the last one committed (a replay after a
        retry or fail-over) adds nothing and returns the current version. Afterwards, checkpoints
        beyond the newest `num_retained` (savepoints excepted) are removed.
        """
        self._check(metadata)
        cid = metadata.checkpoint_id
        dt = self._table()
        before = -1 if dt is None else dt.version()
        if metadata.shared_files:
            live = {p for paths in (self._files_by_checkpoint(dt) if dt is not None else {}).values() for p in paths}
            gone = [p for p in metadata.shared_files if p not in live]
            if gone:  # retention removed a checkpoint this one builds on (a task heard of a completion late)
                raise SharedStateMissingError(
                    f"job {self.job_id}, checkpoint {cid}: builds on state file(s) no longer in {self.table_uri}: {gone[:3]}; "
                    "the tasks take a full checkpoint next"
                )
        if dt is not None:
            done = dt.transaction_version(self.app_id)
            if done is not None and done >= cid:
                if done == cid:
                    log.info("job %s: checkpoint %d already committed (a replay); nothing added", self.job_id, cid)
                else:  # completed after a newer one: subsumed (Flink drops such late completions too)
                    log.warning("job %s: checkpoint %d is older than the committed checkpoint %d; not added", self.job_id, cid, done)
                return before
        if not metadata.completed_ms or not metadata.state_size:
            metadata = metadata.model_copy(update={
                "completed_ms": metadata.completed_ms or int(time.time() * 1000),
                "state_size": metadata.state_size or sum(f.size for f in metadata.files),
            })
        meta = write_metadata_file(self.table_uri, cid, metadata.model_dump_json().encode())
        partition = {PARTITION_COLUMN: str(cid)}
        adds = [
            {"path": f.path, "size": f.size, "num_records": f.rows, "partition_values": partition,
             # operator_id bounds let Spark skip files when reading one operator's state
             **({"min_values": {"operator_id": min(f.operator_ids)}, "max_values": {"operator_id": max(f.operator_ids)}} if f.operator_ids else {})}
            for f in metadata.files
        ]
        adds.append({
            "path": meta.path, "size": meta.size, "num_records": 1, "partition_values": partition,
            "min_values": {"operator_id": META_OPERATOR_ID, "kind": KIND_META},
            "max_values": {"operator_id": META_OPERATOR_ID, "kind": KIND_META},
        })
        try:
            result = commit_add_files(
                self.table_uri, adds, CHECKPOINT_TABLE_SCHEMA, partition_by=[PARTITION_COLUMN],
                app_id=self.app_id, version=cid, storage_options=self.storage_options,
            )
        except CommitOutcomeUnknownError:
            raise  # the meta file may be referenced by the log: keep it
        except Exception:
            self._delete([meta.path])  # nothing was committed: the meta file is an orphan
            raise
        if not result.committed:  # a concurrent replay won the race: ours is an orphan
            self._delete([meta.path])
            return result.version
        self._metadata_cache[meta.path] = metadata
        log.info("job %s: checkpoint %d committed as Delta version %d (%d files)", self.job_id, cid, result.version, len(adds))
        self._apply_retention()
        self._maintain_log(before)
        return result.version

    def _apply_retention(self) -> None:
        """Keep the newest `num_retained` non-savepoint checkpoints and every savepoint; remove the rest.

        The Delta delete has a partition-only predicate, which delta-rs executes as remove actions
        of whole files (no rewrite; checked by its metrics). Files are deleted after that commit,
        so a crash in between leaves orphans (VACUUM removes them), never a checkpoint without files.
        """
        dt = self._table()
        if dt is None:
            return
        files = self._files_by_checkpoint(dt)
        metas = self._metas(dt)
        checkpoints = sorted(cid for cid, path in metas.items() if not self._read_meta(path).is_savepoint)
        # a retained checkpoint keeps every earlier checkpoint whose files it builds on
        needed = {c for cid in checkpoints[-self.num_retained:] for c in map(checkpoint_of_path, self._read_meta(metas[cid]).shared_files)}
        subsumed = [cid for cid in checkpoints[: -self.num_retained] if cid not in needed]
        if not subsumed:
            return
        predicate = f"{PARTITION_COLUMN} IN ({', '.join(str(c) for c in subsumed)})"
        doomed = [p for cid in subsumed for p in files.get(cid, [])]
        try:
            metrics = dt.delete(predicate)
        except Exception as e:  # noqa: BLE001 - the checkpoint is committed; retention retries next time
            log.warning("job %s: removing subsumed checkpoints %s from %s failed (retried after the next checkpoint): %s",
                        self.job_id, subsumed, self.table_uri, e)
            return
        if metrics.get("num_added_files", 0) or metrics.get("num_removed_files", len(doomed)) != len(doomed):
            # cannot happen with a partition-only predicate; if it ever does, keep every file
            log.error("job %s: Delta delete %r did not remove exactly the subsumed files (%s); no file deleted",
                      self.job_id, predicate, metrics)
            return
        for path in doomed:
            self._metadata_cache.pop(path, None)
        self._delete(doomed)
        log.info("job %s: removed subsumed checkpoints %s (%d files)", self.job_id, subsumed, len(doomed))

    def _maintain_log(self, version_before: int) -> None:
        """Every LOG_CHECKPOINT_INTERVAL versions write a Delta log checkpoint and drop expired log files."""
        dt = self._table()
        if dt is None or dt.version() // LOG_CHECKPOINT_INTERVAL == max(version_before, 0) // LOG_CHECKPOINT_INTERVAL:
            return
        try:
            dt.create_checkpoint()
            dt.cleanup_metadata()  # only log entries older than delta.logRetentionDuration (30 days by default)
        except Exception as e:  # noqa: BLE001 - the log is still valid, only longer
            log.warning("job %s: Delta log checkpoint of %s failed: %s", self.job_id, self.table_uri, e)

    # --- deleting files -------------------------------------------------------------------------
    def discard(self, files: list[str], checkpoint_id: int | None = None) -> None:
        """Delete the files of a checkpoint that never completed (timeout, decline); missing files are fine.

        With `checkpoint_id`, also the empty partition folders of that checkpoint and of every older
        one: a task whose write failed (a full disk) leaves a folder and no file, and may fail after
        the checkpoint was already given up. Newer ids are left alone: their tasks may be about to
        write into a folder they just created.
        """
        self._delete(files)
        if checkpoint_id is not None:
            self.remove_empty_partitions(checkpoint_id)

    def _partitions(self, up_to: int) -> list[tuple[int, str]]:
        """(checkpoint id, folder) of the local table's `checkpoint_id=N` folders with N <= `up_to`
        (object stores have no folders: nothing)."""
        _, root = resolve_filesystem(self.table_uri)
        if not os.path.isdir(root):
            return []
        prefix = f"{PARTITION_COLUMN}="
        out = []
        for name in os.listdir(root):
            if name.startswith(prefix) and name[len(prefix):].lstrip("-").isdigit() and int(name[len(prefix):]) <= up_to:
                out.append((int(name[len(prefix):]), os.path.join(root, name)))
        return out

    def remove_empty_partitions(self, up_to: int) -> list[str]:
        """rmdir every empty `checkpoint_id=N` folder with N <= `up_to`; the removed folders."""
        removed = []
        for _, folder in self._partitions(up_to):
            try:
                os.rmdir(folder)  # fails, harmlessly, unless empty
                removed.append(folder)
            except OSError:
                pass
        if removed:
            log.info("job %s: removed %d empty folders of failed checkpoints under %s", self.job_id, len(removed), self.table_uri)
        return removed

    def remove_uncommitted_partitions(self, up_to: int) -> list[str]:
        """At the job's end, when no task writes any more: delete every `checkpoint_id=N` folder
        (N <= `up_to`) that no commit references, with what is in it: the files of checkpoints that
        failed or were aborted and that no acknowledgement listed (a writer killed mid-write, a write
        that failed after its checkpoint was given up, temp files). Committed checkpoints, and the
        shared state they build on, are in committed folders and stay."""
        local = self._partitions(up_to)
        if not local:
            return []
        committed = set(self.completed_ids())
        removed = []
        for cid, folder in local:
            if cid in committed:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
        if removed:
            log.info("job %s: removed %d folders of checkpoints that never completed under %s", self.job_id, len(removed), self.table_uri)
        return removed

    def _delete(self, files: list[str]) -> None:
        """Delete table-relative files, then their partition directories if that left them empty."""
        if not files:
            return
        fs, root = resolve_filesystem(self.table_uri)
        dirs: set[str] = set()
        for rel in files:
            full = f"{root}/{rel.lstrip('/')}"
            try:
                fs.delete_file(full)
            except FileNotFoundError:
                pass
            except Exception as e:  # noqa: BLE001 - a left-over file is garbage, not damage
                log.warning("job %s: could not delete checkpoint file %s: %s", self.job_id, full, e)
            dirs.add(os.path.dirname(full))
        for d in dirs:
            if d.rstrip("/") != root.rstrip("/") and os.path.isdir(d):  # local only; object stores have no directories
                try:
                    os.rmdir(d)
                except OSError:
                    pass  # not empty: other files of that checkpoint remain
