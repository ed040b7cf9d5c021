"""Savepoint tables: one savepoint = one Delta table holding ONE committed checkpoint (kept until disposed).

Layout and commit are a checkpoint table's (`runtime.storage.checkpoint_store`): the tasks write
their state files into `<location>/checkpoint_id=<id>/`, the JobMaster commits them with the
metadata row in one Delta commit, so a savepoint is all-or-nothing. The format is canonical: the
rows are the same whichever state backend wrote them, and either backend restores them, with any
parallelism (key groups, list redistribution). The location is the single path `run -s` takes.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import uuid

from runtime.core.errors import CorruptStateError, StorageError
from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore
from runtime.storage.state_files import resolve_filesystem

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def default_savepoints_base(job_name: str) -> str:
    """`state.savepoints.dir` when none is set: <warehouse>/_savepoints/<job name>."""
    warehouse = os.environ.get("MILLRACE_WAREHOUSE") or os.path.join(os.getcwd(), "warehouse")
    return os.path.join(warehouse, "_savepoints", _UNSAFE.sub("_", job_name).strip("_") or "job")


def new_savepoint_location(base: str, job_id: str) -> str:
    """A fresh savepoint table under `base` (Flink's name: savepoint-<job id prefix>-<random>)."""
    if "://" not in base:
        base = os.path.abspath(base)
    return f"{base.rstrip('/')}/savepoint-{job_id[:6]}-{uuid.uuid4().hex[:12]}"


def commit_savepoint(location: str, metadata: CheckpointMetadata) -> int:
    """Commit a completed savepoint's files and metadata into its own table (one Delta commit)."""
    store = CheckpointStore(location, metadata.job_id, num_retained=1)
    if store.completed_ids():
        raise StorageError(f"savepoint location {location} already holds a savepoint; choose another directory")
    return store.commit(metadata.model_copy(update={"is_savepoint": True, "location": store.table_uri}))


def read_savepoint(location: str) -> CheckpointMetadata:
    """The savepoint (or retained checkpoint: its newest) stored in the table at `location`.

    Anything else is refused with CorruptStateError (non-recoverable), saying what `location` is
    and what was expected."""
    store = CheckpointStore(location, "savepoint-reader")
    try:
        meta = store.latest()
    except CorruptStateError:
        raise  # says what the path is already
    except StorageError as e:
        raise StorageError(f"cannot read the savepoint at {location}: {e}") from e
    if meta is None:
        raise CorruptStateError(f"{location} holds no savepoint: {_what_is_there(location)}")
    return meta.model_copy(update={"location": store.table_uri})


def _what_is_there(location: str) -> str:
    """What a path without a committed savepoint or checkpoint table holds, and what was expected."""
    expected = (
        "expected a savepoint location (`millrace savepoint` / `millrace stop` print it: .../savepoint-<job>-<id>) "
        "or a job's retained checkpoint table (<state.checkpoints.dir>/<job id>)"
    )
    if "://" in location:
        return f"there is no committed Delta table there; {expected}"
    if not os.path.exists(location):
        return f"the path does not exist; {expected}"
    if not os.path.isdir(location):
        return f"it is a file, not a folder; {expected}"
    tables = sorted(e.name for e in os.scandir(location) if e.is_dir() and os.path.isdir(os.path.join(e.path, "_delta_log")))
    if tables:
        shown = ", ".join(tables[:5]) + (f" (and {len(tables) - 5} more)" if len(tables) > 5 else "")
        return f"it is a folder of tables ({shown}); {expected}: one of those, maybe"
    return f"it is a folder without a committed Delta table (no _delta_log, or no commit in it); {expected}"


def discard_savepoint(location: str, files: list[str]) -> None:
    """A savepoint that never completed: its files go, and its folder if no commit ever landed there."""
    store = CheckpointStore(location, "savepoint-discard")
    store.discard(files)
    if "://" not in location and os.path.isdir(location) and not os.path.isdir(os.path.join(location, "_delta_log")):
        shutil.rmtree(location, ignore_errors=True)


def discard_task_snapshot(state_dir: str, savepoint: bool, checkpoint_id: int, subtask_index: int, attempt_number: int) -> list[str]:
    """A task's snapshot that can never complete (its task was cancelled, its writer died): the
    files its attempt wrote for it go (`state_files.discard_attempt_files`), and for a savepoint the
    savepoint's folder too once nothing is left in it and no commit landed there. Called by the task
    itself, also after the JobMaster gave the savepoint up and cleaned what it knew of (a late
    writer); empty folders only, never a tree: another late writer may still be writing."""
    from runtime.storage.state_files import discard_attempt_files

    gone = discard_attempt_files(state_dir, checkpoint_id, subtask_index, attempt_number)
    if savepoint and "://" not in state_dir:
        _remove_if_empty(state_dir)
    return gone


def _remove_if_empty(location: str) -> None:
    """rmdir the folder tree at `location`, deepest first, if it holds no file and no Delta log."""
    if not os.path.isdir(location) or os.path.isdir(os.path.join(location, "_delta_log")):
        return
    for folder, _, _ in sorted(os.walk(location), key=lambda w: len(w[0]), reverse=True):
        try:
            os.rmdir(folder)
        except OSError:
            return  # not empty: someone's file is still there


def dispose_savepoint(location: str) -> CheckpointMetadata:
    """Delete a savepoint (Flink: `savepoint --dispose`); refuses anything that is not a savepoint table."""
    meta = read_savepoint(location)
    if not meta.is_savepoint:
        raise StorageError(f"{location} is a checkpoint table, not a savepoint: not disposed")
    fs, root = resolve_filesystem(location)
    try:
        fs.delete_dir(root)
    except Exception as e:  # permissions, object store errors
        raise StorageError(f"disposing the savepoint at {location} failed: {e}") from e
    log.info("disposed savepoint %d at %s", meta.checkpoint_id, location)
    return meta
