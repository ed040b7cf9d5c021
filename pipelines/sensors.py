"""Sensors: run the roll-up when its input Delta table gets a new version; report failed Millrace jobs.

- `windowed_sum_version_sensor` watches the windowed_sum Delta table (whoever writes it: this code
  location's asset, `millrace run`, another tool) and requests one run of the user_minute_totals
  job per new table version, pinned to that version. The cursor remembers the last version
  handled, so an evaluation with no new version requests nothing; the run_key
  (`<table>@v<version>`) makes Dagster drop a duplicate request even if the cursor were lost.
- `millrace_failure_sensor` looks at every failed run of this code location: for each step that
  failed because a Millrace job failed, it reports the Millrace job id, status and cause in the
  sensor log and as tags on the failed run (visible in the runs list of the UI).
"""
from typing import Any

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    RunFailureSensorContext,
    RunRequest,
    SensorEvaluationContext,
    SkipReason,
    define_asset_job,
    run_failure_sensor,
    sensor,
)
from pydantic import BaseModel

from pipelines.assets import user_minute_totals
from pipelines.tables import WINDOWED_SUM
from resources.millrace import FAILURE_CAUSE, FAILURE_JOB_ID, FAILURE_JOB_NAME, FAILURE_STATUS
from resources.warehouse import DeltaWarehouseResource

user_minute_totals_job = define_asset_job(
    "user_minute_totals_job",
    selection=AssetSelection.assets(user_minute_totals),  # its checks come along
    description="Materialize user_minute_totals from the windowed_sum Delta table (run by the version sensor).",
)

TAG_INPUT_TABLE = "millrace/input_table"
TAG_INPUT_VERSION = "millrace/input_version"


def version_run_request(path: str, version: int) -> RunRequest:
    """One run of the roll-up, reading `path` at exactly `version`."""
    return RunRequest(
        run_key=f"{path}@v{version}",
        run_config={"ops": {"user_minute_totals": {"config": {"input": path, "input_version": version}}}},
        tags={TAG_INPUT_TABLE: path, TAG_INPUT_VERSION: str(version)},
    )


@sensor(
    job=user_minute_totals_job,
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.STOPPED,
    description="Requests a user_minute_totals run when the windowed_sum Delta table's version advances (once per version).",
)
def windowed_sum_version_sensor(context: SensorEvaluationContext, warehouse: DeltaWarehouseResource) -> Any:
    path = warehouse.table_path(WINDOWED_SUM.name)
    version = warehouse.table_version(path)
    if version is None:
        return SkipReason(f"no Delta table at {path} yet")
    last = int(context.cursor) if context.cursor else None
    if last == version:
        return SkipReason(f"{path} is still at version {version}")
    context.update_cursor(str(version))
    context.log.info(f"{path}: version {last} -> {version}: requesting a run")
    return version_run_request(path, version)


class MillraceFailureReport(BaseModel):
    """One failed Millrace job of a failed Dagster run."""

    run_id: str
    dagster_job: str
    step_key: str | None
    millrace_job_id: str
    millrace_job_name: str | None
    status: str
    cause: str

    def tags(self) -> dict[str, str]:
        first_line = self.cause.strip().splitlines()[0] if self.cause.strip() else ""
        return {
            "millrace/failed_job_id": self.millrace_job_id,
            "millrace/failed_job_status": self.status,
            "millrace/failure_cause": first_line[:240],  # the full cause is in the run's step failure
        }


def _value(meta: Any, key: str) -> Any:
    v = meta.get(key)
    return getattr(v, "value", v) if v is not None else None


def failure_reports(context: RunFailureSensorContext) -> list[MillraceFailureReport]:
    """The Millrace jobs behind the failed steps of the run (steps failing for other reasons are skipped)."""
    run = context.dagster_run
    reports = []
    for event in context.get_step_failure_events():
        data = event.step_failure_data
        user = data.user_failure_data if data is not None else None
        meta = user.metadata if user is not None else {}
        job_id = _value(meta, FAILURE_JOB_ID)
        if not job_id:
            continue
        cause = _value(meta, FAILURE_CAUSE) or (user.description if user is not None else None) or (
            data.error.message if data is not None and data.error is not None else "no cause recorded"
        )
        reports.append(
            MillraceFailureReport(
                run_id=run.run_id,
                dagster_job=run.job_name,
                step_key=event.step_key,
                millrace_job_id=str(job_id),
                millrace_job_name=_value(meta, FAILURE_JOB_NAME),
                status=str(_value(meta, FAILURE_STATUS) or "FAILED"),
                cause=str(cause),
            )
        )
    return reports


@run_failure_sensor(
    name="millrace_failure_sensor",
    default_status=DefaultSensorStatus.RUNNING,
    description="Reports the Millrace job id and cause of every failed run (sensor log + tags on the failed run).",
)
def millrace_failure_sensor(context: RunFailureSensorContext) -> Any:
    reports = failure_reports(context)
    if not reports:
        return SkipReason(f"run {context.dagster_run.run_id} failed, but not because of a Millrace job")
    for r in reports:
        context.log.error(
            f"run {r.run_id} ({r.dagster_job}), step {r.step_key}: Millrace job {r.millrace_job_id} "
            f"'{r.millrace_job_name}' {r.status}: {r.cause}"
        )
        context.instance.add_run_tags(r.run_id, r.tags())
    return None
