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


class TableAppender:
    """Idempotent appends to one table by one writer (`app_id`), the table kept open between
    commits (opening it reads its log: far more than a small append costs). Each append is ONE
    commit that records the application transaction (app_id, version): Delta's idempotent write
    (Spark's txnAppId / txnVersion). One writer per app_id (as in Spark)."""

    def __init__(self, table_uri: str, app_id: str, partition_by: list[str] | None = None, storage_options: dict[str, str] | None = None) -> None:
        self.table_uri, self.app_id, self.partition_by, self.storage_options = table_uri, app_id, partition_by, storage_options
        self._table: Any = None

    def _open(self) -> Any:
        """The table, brought up to date (None if there is none yet)."""
        from deltalake import DeltaTable

        if self._table is None:
            if not DeltaTable.is_deltatable(self.table_uri, storage_options=self.storage_options):
                return None
            self._table = DeltaTable(self.table_uri, storage_options=self.storage_options)
        else:
            self._table.update_incremental()
        return self._table

    def committed_version(self) -> int | None:
        """The newest version this app_id committed (None: none, or no table)."""
        try:
            table = self._open()
            return None if table is None else table.transaction_version(self.app_id)
        except Exception as e:
            raise StorageError(f"reading the transactions of {self.table_uri} failed: {e}") from e

    def append(self, data: Any, version: int) -> int | None:
        """Append `data` (a pyarrow Table) as (app_id, `version`); None (nothing written) if the
        table already records `version` or a newer one for app_id, else the new table version.
        Creates the table if there is none."""
        from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

        try:
            table = self._open()
            done = None if table is None else table.transaction_version(self.app_id)
            if done is not None and done >= version:
                return None
            props = CommitProperties(app_transactions=[Transaction(self.app_id, int(version))])
            write_deltalake(self.table_uri if table is None else table, data, mode="append", partition_by=self.partition_by,
                            storage_options=self.storage_options, commit_properties=props)
            if table is None:
                self._table = table = DeltaTable(self.table_uri, storage_options=self.storage_options)
            return int(table.version())
        except Exception as e:
            self._table = None  # read it afresh next time
            raise StorageError(
                f"appending {getattr(data, 'num_rows', '?')} rows ({self.app_id} {version}) to {self.table_uri} failed: {e}; "
                "appending them again with the same version is safe (skipped if this one landed)"
            ) from e

