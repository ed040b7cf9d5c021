"""Asset checks on the Delta tables the Millrace jobs write: row count, schema, no duplicate keys.

The checks read the table the asset's latest materialization recorded (metadata `delta_table`,
at its `delta_version`), or the warehouse's default location when there is none yet, so they can
run in the materializing run (after the asset) or alone from the UI. The logic is in plain
functions over pyarrow objects, tested on good and bad tables.
"""
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from dagster import AssetCheckResult, AssetChecksDefinition, AssetCheckSeverity, AssetKey, MetadataValue, asset_check

from pipelines.tables import TableSpec
from resources.warehouse import DeltaWarehouseResource


def row_count_result(num_rows: int, expected: int | None = None) -> AssetCheckResult:
    """Passes if the table has rows and, when the job reported how many it wrote, exactly that many."""
    meta: dict[str, Any] = {"row_count": num_rows}
    if expected is not None:
        meta["rows_written_by_job"] = expected
        passed = num_rows == expected and num_rows > 0
        why = f"{num_rows} rows, the job wrote {expected}"
    else:
        passed = num_rows > 0
        why = f"{num_rows} rows"
    return AssetCheckResult(passed=passed, metadata={**meta, "summary": why})


def schema_result(actual: pa.Schema, expected: pa.Schema) -> AssetCheckResult:
    """Passes if the table has exactly the expected columns with the expected types (nullability aside)."""
    have = {f.name: f.type for f in actual}
    want = {f.name: f.type for f in expected}
    missing = [n for n in want if n not in have]
    unexpected = [n for n in have if n not in want]
    wrong = {n: f"{have[n]} (expected {want[n]})" for n in want if n in have and have[n] != want[n]}
    return AssetCheckResult(
        passed=not (missing or unexpected or wrong),
        metadata={
            "columns": ", ".join(f"{f.name}: {f.type}" for f in actual),
            "missing_columns": ", ".join(missing) or "none",
            "unexpected_columns": ", ".join(unexpected) or "none",
            "wrong_types": MetadataValue.json(wrong),
        },
    )


def unique_keys_result(table: pa.Table, key_columns: Sequence[str], examples: int = 5) -> AssetCheckResult:
    """Passes if no two rows share the same values in `key_columns`."""
    missing = [k for k in key_columns if k not in table.column_names]
    if missing:
        return AssetCheckResult(passed=False, metadata={"missing_key_columns": ", ".join(missing)})
    counts = table.select(list(key_columns)).group_by(list(key_columns)).aggregate([([], "count_all")])
    dups = counts.filter(pc.greater(counts["count_all"], 1))
    return AssetCheckResult(
        passed=dups.num_rows == 0,
        metadata={
            "key_columns": ", ".join(key_columns),
            "duplicate_keys": dups.num_rows,
            "duplicate_rows": int(pc.sum(dups["count_all"]).as_py() or 0) if dups.num_rows else 0,
            "examples": MetadataValue.json(dups.slice(0, examples).to_pylist()),
        },
    )


def latest_table_location(context: Any, asset_key: AssetKey, warehouse: DeltaWarehouseResource, default_name: str) -> tuple[str, int | None, int | None]:
    """(path, version, rows the job wrote) of the asset's latest materialization, else the default table."""
    event = context.instance.get_latest_materialization_event(asset_key)
    mat = event.asset_materialization if event is not None else None
    meta = mat.metadata if mat is not None else {}

    def value(key: str) -> Any:
        v = meta.get(key)
        return getattr(v, "value", v) if v is not None else None

    path = value("delta_table")
    if not path:
        return warehouse.table_path(default_name), None, None
    version, written = value("delta_version"), value("records_out")
    return str(path), (int(version) if isinstance(version, int) else None), (int(written) if isinstance(written, int) else None)


def _no_table(path: str) -> AssetCheckResult:
    return AssetCheckResult(
        passed=False, severity=AssetCheckSeverity.ERROR, metadata={"delta_table": MetadataValue.path(path), "summary": "no Delta table there"}
    )


def table_checks(asset_key: AssetKey, spec: TableSpec) -> list[AssetChecksDefinition]:
    """The three checks of one table asset."""

    def where(context: Any, warehouse: DeltaWarehouseResource) -> tuple[str, int | None, int | None]:
        path, version, written = latest_table_location(context, asset_key, warehouse, spec.name)
        return path, (version if version is not None and warehouse.table_version(path) is not None else None), written

    @asset_check(asset=asset_key, name="row_count", description=f"{spec.name} has rows, as many as the job wrote")
    def row_count(context, warehouse: DeltaWarehouseResource) -> AssetCheckResult:
        path, version, written = where(context, warehouse)
        if warehouse.table_version(path) is None:
            return _no_table(path)
        snap = warehouse.snapshot(path, version)
        rows = snap.num_records if snap.num_records is not None else warehouse.read_table(path, version).num_rows
        return row_count_result(rows, written)

    @asset_check(asset=asset_key, name="schema", blocking=True, description=f"{spec.name} has columns {', '.join(spec.columns)}")
    def schema(context, warehouse: DeltaWarehouseResource) -> AssetCheckResult:
        path, version, _ = where(context, warehouse)
        if warehouse.table_version(path) is None:
            return _no_table(path)
        return schema_result(warehouse.snapshot(path, version).schema, spec.schema)

    @asset_check(
        asset=asset_key, name="no_duplicate_keys", blocking=True,
        description=f"no two rows of {spec.name} share ({', '.join(spec.key_columns)})",
    )
    def no_duplicate_keys(context, warehouse: DeltaWarehouseResource) -> AssetCheckResult:
        path, version, _ = where(context, warehouse)
        if warehouse.table_version(path) is None:
            return _no_table(path)
        present = set(warehouse.snapshot(path, version).schema.names)
        keys = [k for k in spec.key_columns if k in present]
        table = warehouse.read_table(path, version, keys) if keys else pa.table({})
        return unique_keys_result(table, spec.key_columns)

    return [row_count, schema, no_duplicate_keys]
