"""Small whole-table writes from the client side (the Dagster code location): replace the rows a
predicate selects, delete rows. Each call is ONE Delta commit, so a reader sees the table before
or after it, never half of it. Job output goes through the DeltaSink, not through here.

Predicates are built from column -> value equalities (quoted here), never from user text.
"""
from __future__ import annotations

from typing import Any

from runtime.core.errors import StorageError


def equals_predicate(values: dict[str, Any]) -> str:
    """`a = 'x' AND b = 3` for {"a": "x", "b": 3} (strings quoted, quotes doubled)."""
    if not values:
        raise StorageError("a predicate needs at least one column")
    parts = []
    for col, v in values.items():
        if not col.replace("_", "").isalnum():
            raise StorageError(f"column name {col!r} cannot be used in a predicate")
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise StorageError(f"predicate value for {col} must be a string or an integer, got {v!r}")
        parts.append(f"{col} = {v}" if isinstance(v, int) else f"{col} = '" + v.replace("'", "''") + "'")
    return " AND ".join(parts)


def replace_rows(table_uri: str, data: Any, where: dict[str, Any], partition_by: list[str] | None = None,
                 storage_options: dict[str, str] | None = None) -> int:
    """Replace the rows matching `where` with `data` (a pyarrow Table whose rows all match it);
    creates the table if there is none. Returns the new version."""
    from deltalake import DeltaTable, write_deltalake

    predicate = equals_predicate(where)
    try:
        exists = DeltaTable.is_deltatable(table_uri, storage_options=storage_options)
        if exists:
            write_deltalake(table_uri, data, mode="overwrite", predicate=predicate, storage_options=storage_options)
        else:
            write_deltalake(table_uri, data, mode="error", partition_by=partition_by, storage_options=storage_options)
        return DeltaTable(table_uri, storage_options=storage_options).version()
    except Exception as e:
        raise StorageError(f"replacing the rows where {predicate} of {table_uri} failed, nothing changed: {e}") from e


def delete_rows(table_uri: str, where: dict[str, Any], storage_options: dict[str, str] | None = None) -> int:
    """Delete the rows matching `where`; returns how many went (0 if there is no table)."""
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(table_uri, storage_options=storage_options):
        return 0
    predicate = equals_predicate(where)
    try:
        metrics = DeltaTable(table_uri, storage_options=storage_options).delete(predicate)
    except Exception as e:
        raise StorageError(f"deleting the rows where {predicate} of {table_uri} failed, nothing changed: {e}") from e
    return int(metrics.get("num_deleted_rows", 0) or 0)


def create_table(table_uri: str, schema: Any, partition_by: list[str] | None = None, storage_options: dict[str, str] | None = None) -> int:
    """Create an empty table with `schema` (a pyarrow Schema) unless there is one; returns its newest version."""
    from deltalake import DeltaTable

    try:
        DeltaTable.create(table_uri, schema, partition_by=partition_by, mode="ignore", storage_options=storage_options)
    except Exception as e:
        if not DeltaTable.is_deltatable(table_uri, storage_options=storage_options):  # else another writer created it meanwhile
            raise StorageError(f"creating the Delta table {table_uri} failed: {e}") from e
    return int(DeltaTable(table_uri, storage_options=storage_options).version())


def append_rows(table_uri: str, data: Any, app_id: str, version: int, partition_by: list[str] | None = None,
                storage_options: dict[str, str] | None = None) -> int | None:
    """Append `data` (a pyarrow Table) in ONE commit that records the application transaction
    (app_id, version): Delta's idempotent write (Spark's txnAppId / txnVersion). If the table already
    records `version` or a newer one for `app_id`, nothing is written and None is returned; else the
    new table version. Creates the table if there is none. One writer per app_id (as in Spark)."""
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    try:
        if DeltaTable.is_deltatable(table_uri, storage_options=storage_options):
            done = DeltaTable(table_uri, storage_options=storage_options).transaction_version(app_id)
            if done is not None and done >= version:
                return None
        props = CommitProperties(app_transactions=[Transaction(app_id, int(version))])
        write_deltalake(table_uri, data, mode="append", partition_by=partition_by, storage_options=storage_options, commit_properties=props)
        return int(DeltaTable(table_uri, storage_options=storage_options).version())
    except Exception as e:
        raise StorageError(
            f"appending {getattr(data, 'num_rows', '?')} rows ({app_id} {version}) to {table_uri} failed: {e}; "
            "appending them again with the same version is safe (skipped if this one landed)"
        ) from e
