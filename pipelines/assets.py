"""Assets whose materialization runs a Millrace job, and their run configuration.

- windowed_sum_table: the main job (generated events -> per user and 1 s window count/sum).
- user_minute_totals: reads windowed_sum_table's Delta table (DeltaSource) and rolls it up per user
  and minute, so the asset graph shows the lineage.

Each materialization records the Millrace job (id, plan: chains / parallelism / slots, records
in/out, duration) and the Delta table it left (path, version, row count, schema).

No `from __future__ import annotations` here: Dagster reads the Config classes' annotations.
"""
from typing import Any

from dagster import (
    AssetExecutionContext,
    AssetKey,
    Config,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableSchema,
    asset,
)
from pydantic import Field

from pipelines.jobs import user_minute_totals as umt_program
from pipelines.jobs import windowed_sum
from pipelines.tables import USER_MINUTE_TOTALS, WINDOWED_SUM
from resources.millrace import MillraceClusterResource
from resources.warehouse import DeltaWarehouseResource
from runtime.api.datastream import StreamExecutionEnvironment

GROUP = "millrace"


class WindowedSumConfig(Config):
    events: int = Field(default=2_000_000, ge=0, description="number of generated events")
    parallelism: int = Field(default=2, ge=1, description="parallelism of the Millrace job")
    output: str = Field(
        default="", description="location of the output Delta table; empty: the warehouse's 'windowed_sum' table"
    )
    per_record: bool = Field(
        default=False, description="run the per-record Python functions instead of the columnar path (slower; same result)"
    )


class UserMinuteTotalsConfig(Config):
    parallelism: int = Field(default=2, ge=1, description="parallelism of the Millrace job")
    input: str = Field(
        default="",
        description="the windowed_sum Delta table to read; empty: where windowed_sum_table was last materialized (else the warehouse's table)",
    )
    input_version: int | None = Field(default=None, ge=0, description="version of the input table to read; empty: the newest")
    output: str = Field(
        default="", description="location of the output Delta table; empty: the warehouse's 'user_minute_totals' table"
    )


def delta_table_metadata(warehouse: DeltaWarehouseResource, path: str) -> dict[str, Any]:
    """Path, version, row count and column schema of the Delta table at `path` (as Dagster metadata)."""
    snap = warehouse.snapshot(path)
    rows = snap.num_records if snap.num_records is not None else warehouse.read_table(path).num_rows
    return {
        "delta_table": MetadataValue.path(path),
        "delta_version": snap.version,
        "delta_files": len(snap.files),
        "row_count": rows,
        "dagster/row_count": rows,
        "dagster/column_schema": TableSchema(columns=[TableColumn(f.name, str(f.type)) for f in snap.schema]),
    }


def _latest_path(context: AssetExecutionContext, key: AssetKey) -> str | None:
    event = context.instance.get_latest_materialization_event(key)
    meta = event.asset_materialization.metadata if event is not None and event.asset_materialization is not None else {}
    value = meta.get("delta_table")
    return str(value.value) if value is not None else None


@asset(
    group_name=GROUP,
    kinds={"python", "delta"},
    description="Per-user count and sum over 1 s event-time windows (Millrace job windowed_sum), a Delta table.",
    metadata={"table": WINDOWED_SUM.name, "key_columns": ", ".join(WINDOWED_SUM.key_columns)},
)
def windowed_sum_table(
    context: AssetExecutionContext, config: WindowedSumConfig, millrace: MillraceClusterResource, warehouse: DeltaWarehouseResource
) -> MaterializeResult:
    output = warehouse.resolve(config.output) if config.output else warehouse.table_path(WINDOWED_SUM.name)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(config.parallelism)
    windowed_sum.build(env, config.events, output, config.per_record)
    run = millrace.run(env.get_job_graph("windowed_sum"), context=context)
    return MaterializeResult(metadata={**run.metadata(), "events": config.events, **delta_table_metadata(warehouse, output)})


@asset(
    group_name=GROUP,
    kinds={"python", "delta"},
    deps=[windowed_sum_table],
    description="windowed_sum rolled up per user and minute (Millrace job user_minute_totals reading windowed_sum's Delta table).",
    metadata={"table": USER_MINUTE_TOTALS.name, "key_columns": ", ".join(USER_MINUTE_TOTALS.key_columns)},
)
def user_minute_totals(
    context: AssetExecutionContext, config: UserMinuteTotalsConfig, millrace: MillraceClusterResource, warehouse: DeltaWarehouseResource
) -> MaterializeResult:
    source_path = (
        warehouse.resolve(config.input) if config.input
        else _latest_path(context, windowed_sum_table.key) or warehouse.table_path(WINDOWED_SUM.name)
    )
    output = warehouse.resolve(config.output) if config.output else warehouse.table_path(USER_MINUTE_TOTALS.name)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(config.parallelism)
    source = umt_program.build(env, source_path, output, config.input_version)
    context.log.info(f"reading {source_path} at version {source.snapshot_version} ({len(source.snapshot.files)} files)")
    run = millrace.run(env.get_job_graph("user_minute_totals"), context=context)
    return MaterializeResult(
        metadata={
            **run.metadata(),
            "input_table": MetadataValue.path(source_path),
            "input_version": source.snapshot_version,
            **delta_table_metadata(warehouse, output),
        }
    )
