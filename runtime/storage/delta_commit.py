"""Commit externally written Parquet files to a Delta table in one transaction (delta-rs).

Used by the Delta sink's coordinator (and later by checkpoint-driven two-phase commits).
Idempotent per (app_id, version): Delta's `txn` action records the newest version committed by an
application; a replayed commit whose version is not newer is skipped, so a retry or a JobMaster
fail-over never adds the same files twice.
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.core.errors import StorageError

log = logging.getLogger(__name__)


def _add_action(f: dict[str, Any]) -> Any:
    from deltalake.transaction import AddAction

    stats: dict[str, Any] = {"numRecords": int(f.get("num_records", 0))}
    for key, delta_key in (("min_values", "minValues"), ("max_values", "maxValues"), ("null_count", "nullCount")):
        if f.get(key):
            stats[delta_key] = f[key]
    return AddAction(
        f["path"],
        int(f["size"]),
        dict(f.get("partition_values") or {}),
        int(f.get("modification_time") or time.time() * 1000),
        True,
        json.dumps(stats),
    )


def _open_table(table_uri: str, storage_options: dict[str, str] | None) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(table_uri, storage_options=storage_options)
    except TableNotFoundError:
        return None


def committed_version(table_uri: str, app_id: str, storage_options: dict[str, str] | None = None) -> int | None:
    """The newest (app_id) transaction version recorded in the table, or None."""
    dt = _open_table(table_uri, storage_options)
    return None if dt is None else dt.transaction_version(app_id)


@dataclass(frozen=True)
class CommitResult:
    version: int  # the table version after the call
    committed: bool  # False: this (app_id, version) was already committed, nothing was added


class CommitOutcomeUnknownError(StorageError):
    """The commit call failed in a way that does not tell whether it landed: keep the files."""


def _check_append_schema(table_uri: str, dt: Any, schema: Any) -> None:
    """Appending must not change the table's columns or their types (Delta types compared)."""
    from deltalake import Schema as DeltaSchema

    have = {f.name: f.type for f in dt.schema().fields}
    new = {f.name: f.type for f in DeltaSchema.from_arrow(schema).fields}
    problems = [f"column {n!r} is {new[n]} but the table has {have[n]}" for n in new if n in have and new[n] != have[n]]
    problems += [f"column {n!r} is not in the table" for n in new if n not in have]
    problems += [f"the table's column {n!r} is missing" for n in have if n not in new]
    if problems:
        raise StorageError(
            f"Delta append to {table_uri} refused, the table is untouched: the data's schema does not match the "
            f"table's ({'; '.join(problems)}). Write a matching schema, or use mode='overwrite'."
        )


def table_schema(table_uri: str, storage_options: dict[str, str] | None = None) -> Any:
    """The table's schema as a pyarrow Schema, or None if there is no table yet."""
    import pyarrow as pa

    dt = _open_table(table_uri, storage_options)
    return None if dt is None else pa.schema(dt.schema().to_arrow())


def commit_add_files(
    table_uri: str,
    files: Sequence[dict[str, Any]],
    schema: Any,
    mode: str = "append",
    partition_by: list[str] | None = None,
    app_id: str | None = None,
    version: int | None = None,
    storage_options: dict[str, str] | None = None,
    replace_where: dict[str, str] | None = None,
) -> CommitResult:
    """Add `files` (paths relative to the table root) in ONE Delta commit; create the table if needed.

    `replace_where` (mode "overwrite" only): partition column -> value; the commit removes only the
    files of those partitions (Delta's replaceWhere on partition columns), the rest of the table stays.

    files: dicts with path, size, num_records, partition_values, and optional min_values /
    max_values / null_count / modification_time. schema: a pyarrow Schema of the whole table
    (partition columns included). An append whose schema differs from the table's is refused
    before anything is written. Raises StorageError when nothing was committed, and
    CommitOutcomeUnknownError when the commit call failed without saying whether it landed
    (then the files must be kept).
    """
    if mode not in ("append", "overwrite"):
        raise StorageError(f"Delta commit to {table_uri}: mode must be 'append' or 'overwrite', got {mode!r}")
    if replace_where and mode != "overwrite":
        raise StorageError(f"Delta commit to {table_uri}: replace_where {replace_where} needs mode 'overwrite', got {mode!r}")
    filters = [(k, "=", v) for k, v in replace_where.items()] if replace_where and mode == "overwrite" else None
    from deltalake import CommitProperties, Transaction
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import create_table_with_add_actions

    props = None
    if app_id is not None:
        if version is None:
            raise StorageError(f"Delta commit to {table_uri}: app_id {app_id!r} needs a version")
        props = CommitProperties(app_transactions=[Transaction(app_id, int(version))])
    actions = [_add_action(f) for f in files]
    try:
        dt = _open_table(table_uri, storage_options)
        if dt is None:
            try:
                create_table_with_add_actions(
                    table_uri,
                    DeltaSchema.from_arrow(schema),
                    actions,
                    mode="error",
                    partition_by=partition_by or None,
                    storage_options=storage_options,
                    commit_properties=props,
                )
                return CommitResult(_open_table(table_uri, storage_options).version(), True)
            except Exception:
                # someone else created it meanwhile: fall through to a normal commit
                dt = _open_table(table_uri, storage_options)
                if dt is None:
                    raise
        dt.update_incremental()  # see the newest txn actions before deciding
        if app_id is not None and version is not None:  # (an app_id without a version was refused above)
            done = dt.transaction_version(app_id)
            if done is not None and done >= int(version):
                log.info("Delta commit to %s skipped: %s version %s already committed (%s)", table_uri, app_id, version, done)
                return CommitResult(dt.version(), False)
        if mode == "append" or filters:  # a partial overwrite keeps the table's other rows: same schema
            _check_append_schema(table_uri, dt, schema)
    except StorageError:
        raise
    except Exception as e:
        raise StorageError(f"Delta commit of {len(actions)} files to {table_uri} failed, nothing committed: {e}") from e
    before = dt.version()
    try:
        dt.create_write_transaction(
            actions, mode, schema, partition_by=partition_by or None, partition_filters=filters, commit_properties=props
        )
    except Exception as e:
        # a failure here may come after the log entry was written (e.g. a post-commit step):
        # look at the table again before saying anything
        landed = _landed(table_uri, storage_options, app_id, version, before)
        if landed is False:
            raise StorageError(f"Delta commit of {len(actions)} files to {table_uri} failed, nothing committed: {e}") from e
        if landed is None:
            raise CommitOutcomeUnknownError(
                f"Delta commit of {len(actions)} files to {table_uri} failed and it is unknown whether it landed "
                f"(no app transaction id to check); its files are kept: {e}"
            ) from e
        log.warning("Delta commit to %s raised after it landed (%s); treating it as committed", table_uri, e)
    try:
        dt = _open_table(table_uri, storage_options)
        return CommitResult(dt.version() if dt is not None else before + 1, True)
    except Exception:  # noqa: BLE001 - the commit landed; only reading the new version failed
        return CommitResult(before + 1, True)


def _landed(table_uri: str, storage_options: dict[str, str] | None, app_id: str | None, version: int | None, before: int) -> bool | None:
    """After a failed commit call: True if our commit is in the log, False if not, None if unknowable."""
    try:
        dt = _open_table(table_uri, storage_options)
    except Exception:  # noqa: BLE001 - the table cannot be read now: whether the commit landed is unknowable
        return None
    if dt is None:
        return False
    if app_id is not None and version is not None:
        done = dt.transaction_version(app_id)
        return done is not None and done >= int(version)
    return False if dt.version() == before else None


def referenced_files(table_uri: str, storage_options: dict[str, str] | None = None) -> set[str]:
    """Paths (relative to the table root) of every file the table's current version references."""
    dt = _open_table(table_uri, storage_options)
    if dt is None:
        return set()
    dt.update_incremental()
    # relative paths as the log stores them (URL-decoded: partition values may be escaped)
    from urllib.parse import unquote

    import pyarrow as pa

    return {unquote(p) for p in pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()}
