"""Savepoint backfills: daily assets whose Millrace job carries its state from day to day.

- `daily_events`: the example's input, one partition per day from 2026-01-01 (pipelines/jobs/
  daily_events.py says which events a day holds); materialising a day replaces only that day in
  the Delta table `<warehouse>/daily_events` (partitioned by `day`).
- `running_totals`: depends on the same day of `daily_events` and on its own previous day.
  Materialising day D runs pipelines/jobs/running_totals.py on D's events, restored from the
  savepoint that day D-1 registered (the first day starts empty); the job replaces D's rows of
  `<warehouse>/running_totals` and stops with a final savepoint at the end of D's input, which is
  registered for D (the savepoint it replaces, from an earlier run of D, is disposed). A backfill
  of a range runs the days in order (the self-dependency); each day's check
  `totals_carry_forward` verifies totals(D) = totals(D-1) + day D for the users of day D.

No `from __future__ import annotations` here: Dagster reads the Config classes' annotations.
"""
from datetime import date, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetDep,
    AssetExecutionContext,
    AssetKey,
    Config,
    DailyPartitionsDefinition,
    Failure,
    MaterializeResult,
    MetadataValue,
    TimeWindowPartitionMapping,
    asset,
)
from pydantic import Field

from pipelines.assets import delta_table_metadata
from pipelines.jobs import running_totals as program
from pipelines.jobs.daily_events import FIRST_DAY, day_events
from pipelines.savepoint_registry import SavepointEntry, SavepointRegistry
from resources.millrace import MillraceClusterResource
from resources.warehouse import DeltaWarehouseResource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import InvalidProgramError, StorageError

GROUP = "savepoint_lifecycle"
DAILY = DailyPartitionsDefinition(start_date=FIRST_DAY.isoformat(), timezone="UTC")
EVENTS_TABLE = "daily_events"
TOTALS_TABLE = "running_totals"
CHECK = "totals_carry_forward"


class DailyEventsConfig(Config):
    events_per_day: int = Field(default=100_000, ge=1, description="events in one day (N)")


class RunningTotalsConfig(Config):
    parallelism: int = Field(default=2, ge=1, description="parallelism of the Millrace job")


def previous_day(day: str) -> str | None:
    """The day before `day`, or None for the first day of the partitions."""
    d = date.fromisoformat(day)
    return None if d <= FIRST_DAY else (d - timedelta(days=1)).isoformat()


@asset(
    partitions_def=DAILY,
    group_name=GROUP,
    kinds={"python", "delta"},
    description="One day of generated events (user_id, value, ts_ms) in the Delta table daily_events, partitioned by day.",
)
def daily_events(context: AssetExecutionContext, config: DailyEventsConfig, warehouse: DeltaWarehouseResource) -> MaterializeResult:
    day = context.partition_key
    cols = day_events(day, config.events_per_day)
    table = pa.table({**cols, "day": pa.array([day] * config.events_per_day, pa.string())})
    path = warehouse.table_path(EVENTS_TABLE)
    version = warehouse.replace_rows(path, table, {"day": day}, partition_by=["day"])
    context.log.info(f"{path}: day {day} replaced by {table.num_rows:,} events (version {version})")
    return MaterializeResult(
        metadata={"day": day, "events": table.num_rows, "events_per_day": config.events_per_day, **delta_table_metadata(warehouse, path)}
    )


@asset(
    partitions_def=DAILY,
    group_name=GROUP,
    kinds={"python", "delta"},
    deps=[
        AssetDep(daily_events),
        # the previous day's savepoint: a backfill runs the days in order
        AssetDep(AssetKey(TOTALS_TABLE), partition_mapping=TimeWindowPartitionMapping(start_offset=-1, end_offset=-1)),
    ],
    check_specs=[AssetCheckSpec(CHECK, asset=TOTALS_TABLE, description="totals(D) = totals(D-1) + the events of day D, for every user of day D")],
    description="Per user, events and value since 2026-01-01 (Millrace job running_totals, state carried day to day by savepoints).",
)
def running_totals(
    context: AssetExecutionContext, config: RunningTotalsConfig, millrace: MillraceClusterResource, warehouse: DeltaWarehouseResource
) -> MaterializeResult:
    day = context.partition_key
    registry = SavepointRegistry(warehouse)
    prev = previous_day(day)
    restore = None
    if prev is not None:
        entry = registry.lookup(program.JOB_NAME, prev)
        if entry is None:
            raise Failure(
                description=f"running_totals {day}: the previous partition {prev} has no savepoint in {registry.path}; "
                f"materialize running_totals for {prev} first (or backfill the range up to {day})"
            )
        restore = entry.path
        context.log.info(f"restoring day {day} from the savepoint of {prev}: {restore} (checkpoint {entry.checkpoint_id})")
    events_path, output = warehouse.table_path(EVENTS_TABLE), warehouse.table_path(TOTALS_TABLE)
    try:
        env = StreamExecutionEnvironment.get_execution_environment(
            program.configure(restore, warehouse.savepoint_path(program.JOB_NAME), stop_at_end=True)
        )
        env.set_parallelism(config.parallelism)
        program.build_daily(env, day, events_path, output)
    except InvalidProgramError as e:
        raise Failure(description=f"running_totals {day}: {e}") from e
    run = millrace.get_client().run(env.get_job_graph(program.JOB_NAME), context=context)
    savepoint = run.accumulators.get("savepoint_path")
    if not savepoint:
        raise Failure(description=f"running_totals {day}: Millrace job {run.job_id} ended {run.status} without its final savepoint")
    from runtime.storage.savepoints import dispose_savepoint, read_savepoint

    entry = SavepointEntry.of(program.JOB_NAME, day, read_savepoint(savepoint))
    replaced = registry.register(entry)
    if replaced is not None:
        try:
            dispose_savepoint(replaced.path)
            context.log.info(f"disposed the savepoint of an earlier run of {day}: {replaced.path}")
        except StorageError as e:
            context.log.warning(f"could not dispose the superseded savepoint {replaced.path}: {e}")
    totals = warehouse.read_table(output)
    check = carry_forward_result(totals, warehouse.read_table(events_path, columns=["user_id", "value", "day"]), day)
    rows = int(pc.sum(pc.equal(totals["day"], day)).as_py() or 0)
    return MaterializeResult(
        metadata={
            **run.metadata(),
            "day": day,
            "savepoint_path": MetadataValue.path(savepoint),
            "savepoint_checkpoint_id": entry.checkpoint_id,
            "state_bytes": entry.state_bytes,
            "restored_from": MetadataValue.path(restore) if restore else "nothing (first day)",
            "rows": rows,
            **delta_table_metadata(warehouse, output),
        },
        check_results=[check],
    )


def _per_user(table: pa.Table, value_columns: list[str], aggs: list[str]) -> dict[int, tuple[int, ...]]:
    grouped = table.group_by("user_id").aggregate([(c, a) for c, a in zip(value_columns, aggs)])
    cols = [grouped[f"{c}_{a}"].to_pylist() for c, a in zip(value_columns, aggs)]
    return {u: tuple(int(x[i]) for x in cols) for i, u in enumerate(grouped["user_id"].to_pylist())}


def carry_forward_result(totals: pa.Table, events: pa.Table, day: str, examples: int = 5) -> AssetCheckResult:
    """totals(D) = totals(D-1) + day D per user of day D, where totals(D-1) is the user's latest row
    before D (0 if none), and exactly the users with events on D have a row for D."""
    today = totals.filter(pc.equal(totals["day"], day))
    before = totals.filter(pc.less(totals["day"], day))
    got = {r["user_id"]: (r["events_total"], r["value_total"]) for r in today.to_pylist()}
    latest: dict[int, tuple[str, int, int]] = {}
    for r in before.to_pylist():
        u = r["user_id"]
        if u not in latest or latest[u][0] < r["day"]:
            latest[u] = (r["day"], r["events_total"], r["value_total"])
    day_ev = events.filter(pc.equal(events["day"], day))
    counts = _per_user(day_ev, ["value", "value"], ["count", "sum"])
    wrong: list[dict[str, Any]] = []
    for u, (n, v) in counts.items():
        _, pe, pv = latest.get(u, ("", 0, 0))
        want = (pe + n, pv + v)
        if got.get(u) != want:
            wrong.append({"user_id": u, "expected": list(want), "got": list(got[u]) if u in got else None})
    extra = sorted(set(got) - set(counts))
    duplicates = today.num_rows - len(got)
    return AssetCheckResult(
        check_name=CHECK,
        passed=bool(counts) and not wrong and not extra and duplicates == 0,
        metadata={
            "day": day,
            "users_of_day": len(counts),
            "rows_of_day": today.num_rows,
            "wrong_totals": len(wrong),
            "users_without_events": len(extra),
            "duplicate_rows": duplicates,
            "examples": MetadataValue.json(wrong[:examples]),
        },
    )
