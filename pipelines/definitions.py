"""The Dagster code location: every definition assembled here (loaded by workspace.yaml).

Resources:
- `spark`: SparkResource (Delta configured, started lazily); its config can be set at launch.
- `millrace`: MillraceClusterResource in embedded mode (per-job cluster in the run process,
  TaskManagers on Spark executors; set `provider: local` at launch for local processes), used by
  the assets (daily_events / running_totals are the savepoint backfill, pipelines/daily_totals.py).
  Switch it to `mode: session` to run them on a session cluster instead.
- `millrace_session`: MillraceClusterResource in session mode for the streaming jobs (and the live
  running_totals lifecycle, pipelines/live.py, whose input the `live_events` asset appends); the cluster
  is MILLRACE_URL + MILLRACE_TOKEN when set (EnvVar), else the cluster file under MILLRACE_HOME.
- `warehouse`: DeltaWarehouseResource; base location MILLRACE_WAREHOUSE or <project>/warehouse.
- `millrace_autoscaler`: the autoscaling sensor's settings (pipelines/autoscaling_sensor.py): target
  utilisation, its boundary, min/max parallelism, cooldown.
"""
import os
from pathlib import Path

from dagster import Definitions, EnvVar

from pipelines.assets import user_minute_totals, windowed_sum_table
from pipelines.autoscaling_sensor import MillraceAutoscalerResource, apply_millrace_rescale, millrace_autoscaling_sensor
from pipelines.checks import table_checks
from pipelines.daily_totals import daily_events, running_totals
from pipelines.kafka_feed import events_to_kafka_job
from pipelines.live import (
    live_events,
    live_events_job,
    live_events_schedule,
    millrace_restore_sensor,
    savepoint_live_jobs,
    savepoint_live_jobs_schedule,
    start_live_running_totals_job,
    stop_live_with_savepoint,
)
from pipelines.schedules import daily_tables_job, daily_tables_schedule
from pipelines.sensors import millrace_failure_sensor, user_minute_totals_job, windowed_sum_version_sensor
from pipelines.streaming import cancel_live_activity_job, submit_live_activity_job
from pipelines.tables import USER_MINUTE_TOTALS, WINDOWED_SUM
from resources.millrace import MillraceClusterResource
from resources.spark import SparkResource
from resources.warehouse import DeltaWarehouseResource

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def _env_or_none(name: str) -> EnvVar | None:
    # EnvVar fails a run when the variable is unset; unset means "use the cluster file" here
    return EnvVar(name) if os.environ.get(name) else None


spark = SparkResource.configure_at_launch()  # one Spark config, editable in the launchpad, shared below

resources = {
    "spark": spark,
    "millrace": MillraceClusterResource(mode="embedded", provider="spark", spark=spark),
    "millrace_session": MillraceClusterResource(
        mode="session", url=_env_or_none("MILLRACE_URL"), token=_env_or_none("MILLRACE_TOKEN"), spark=spark
    ),
    "warehouse": DeltaWarehouseResource(base_path=os.environ.get("MILLRACE_WAREHOUSE", str(PROJECT_ROOT / "warehouse"))),
    "millrace_autoscaler": MillraceAutoscalerResource(),
}

asset_checks = [
    *table_checks(windowed_sum_table.key, WINDOWED_SUM),
    *table_checks(user_minute_totals.key, USER_MINUTE_TOTALS),
]

defs = Definitions(
    assets=[windowed_sum_table, user_minute_totals, daily_events, running_totals, live_events],
    asset_checks=asset_checks,
    jobs=[
        daily_tables_job, user_minute_totals_job, submit_live_activity_job, cancel_live_activity_job,
        start_live_running_totals_job, savepoint_live_jobs, stop_live_with_savepoint, apply_millrace_rescale, live_events_job,
        events_to_kafka_job,
    ],
    schedules=[daily_tables_schedule, savepoint_live_jobs_schedule, live_events_schedule],
    sensors=[windowed_sum_version_sensor, millrace_failure_sensor, millrace_restore_sensor, millrace_autoscaling_sensor],
    resources=resources,
)
