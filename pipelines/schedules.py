"""The daily job: materialize both tables (and run their checks) once a day."""
from typing import Any

from dagster import AssetSelection, DefaultScheduleStatus, RunRequest, ScheduleEvaluationContext, define_asset_job, schedule

from pipelines.assets import user_minute_totals, windowed_sum_table

daily_tables_job = define_asset_job(
    "daily_tables_job",
    selection=AssetSelection.assets(windowed_sum_table, user_minute_totals),
    description="windowed_sum_table, then user_minute_totals from it, with their asset checks.",
)

DAILY_CRON = "0 3 * * *"  # 03:00 UTC


@schedule(
    job=daily_tables_job,
    cron_schedule=DAILY_CRON,
    execution_timezone="UTC",
    default_status=DefaultScheduleStatus.STOPPED,
    description="Rebuild the Millrace tables every day at 03:00 UTC.",
)
def daily_tables_schedule(context: ScheduleEvaluationContext) -> Any:
    day = context.scheduled_execution_time.strftime("%Y-%m-%d")
    # run_key per day: a tick evaluated twice (daemon restart) still launches one run
    return RunRequest(run_key=f"daily-{day}", tags={"millrace/day": day})
