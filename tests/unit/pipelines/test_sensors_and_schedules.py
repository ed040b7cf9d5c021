"""The version sensor fires once per new input version; the failure sensor reports Millrace causes;
the daily schedule requests one valid run per day."""
from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from dagster import (
    DagsterInstance,
    Failure,
    build_schedule_context,
    build_sensor_context,
    job,
    op,
    validate_run_config,
)
from deltalake import write_deltalake

from pipelines.definitions import defs
from pipelines.schedules import DAILY_CRON, daily_tables_schedule
from pipelines.sensors import windowed_sum_version_sensor
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
from resources.millrace import SubmittedJob
from runtime.api.common import Types
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import JobExecutionError
from runtime.core.states import JobStatus
from runtime.rpc.messages import ErrorInfo
from tests.pipelines_support import report_failed_run
from tests.unit.pipelines.test_resources import FakeJobClient

pytestmark = pytest.mark.unit


def _tick(warehouse: DeltaWarehouseResource, cursor: str | None):
    with build_sensor_context(resources={"warehouse": warehouse}, cursor=cursor) as ctx:
        data = windowed_sum_version_sensor.evaluate_tick(ctx)
    return data.run_requests or [], data.cursor, data.skip_message


def _append(path: str, n: int) -> None:
    write_deltalake(path, pa.table({"user_id": list(range(n)), "window_start": [0] * n, "count": [1] * n, "sum": [2] * n}), mode="append")


def test_version_sensor_fires_once_per_new_version(tmp_path):
    wh = DeltaWarehouseResource(base_path=str(tmp_path))
    path = wh.table_path("windowed_sum")
    requests, cursor, skip = _tick(wh, None)
    assert requests == [] and "no Delta table" in skip

    _append(path, 3)  # version 0
    requests, cursor, _ = _tick(wh, cursor)
    assert len(requests) == 1 and cursor == "0"
    req = requests[0]
    assert req.run_key == f"{path}@v0"
    assert req.run_config["ops"]["user_minute_totals"]["config"] == {"input": path, "input_version": 0}
    job_def = defs.resolve_job_def("user_minute_totals_job")
    assert validate_run_config(job_def, req.run_config)  # the launchpad would accept it

    for _ in range(2):  # same version: nothing, however often it is evaluated
        requests, cursor, skip = _tick(wh, cursor)
        assert requests == [] and cursor == "0" and "still at version 0" in skip

    _append(path, 2)  # version 1
    _append(path, 2)  # version 2 before the next tick: one run, for the newest version
    requests, cursor, _ = _tick(wh, cursor)
    assert [r.run_key for r in requests] == [f"{path}@v2"] and cursor == "2"
    assert _tick(wh, cursor)[0] == []


def test_daily_schedule_requests_one_valid_run_per_day():
    assert daily_tables_schedule.cron_schedule == DAILY_CRON
    assert daily_tables_schedule.job_name == "daily_tables_job"
    when = datetime(2026, 3, 4, 3, 0, tzinfo=UTC)
    with build_schedule_context(scheduled_execution_time=when) as ctx:
        data = daily_tables_schedule.evaluate_tick(ctx)
    (req,) = data.run_requests
    assert req.run_key == "daily-2026-03-04" and req.tags["millrace/day"] == "2026-03-04"
    job_def = defs.resolve_job_def("daily_tables_job")
    assert validate_run_config(job_def, req.run_config or {})
    selected = {k.to_user_string() for k in job_def.asset_layer.executable_asset_keys}
    assert selected == {"windowed_sum_table", "user_minute_totals"}


def test_hourly_savepoint_schedule_requests_one_run_per_hour():
    from pipelines.live import savepoint_live_jobs_schedule

    assert savepoint_live_jobs_schedule.cron_schedule == "0 * * * *" and savepoint_live_jobs_schedule.job_name == "savepoint_live_jobs"
    runs = []
    for hour in (5, 5, 6):  # a tick evaluated twice (daemon restart) has the same run key
        with build_schedule_context(scheduled_execution_time=datetime(2026, 3, 4, hour, 0, tzinfo=UTC)) as ctx:
            (req,) = savepoint_live_jobs_schedule.evaluate_tick(ctx).run_requests
        runs.append(req.run_key)
        assert validate_run_config(defs.resolve_job_def("savepoint_live_jobs"), req.run_config or {})
    assert runs[0] == runs[1] != runs[2]


def _graph():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2], type_info=Types.LONG()).print()
    return env.get_job_graph("poisoned")


def test_failure_sensor_reports_the_millrace_job_and_its_cause():
    client = FakeJobClient(job_id="a" * 32, statuses=[JobStatus.FAILED])

    def fail():
        raise JobExecutionError(
            "job aaaa 'poisoned' FAILED: ValueError: record 7 is poisoned\n\nCaused by ...", job_id=client.job_id,
            cause=ErrorInfo(type_name="ValueError", message="record 7 is poisoned"),
        )

    client.result = fail

    @op
    def run_millrace(millrace: MillraceClusterResource) -> None:
        millrace.wait(SubmittedJob(client, _graph(), detached=False))

    @op
    def plain_failure() -> None:
        raise Failure(description="not a Millrace problem")

    @job
    def millrace_job() -> None:
        run_millrace()

    @job
    def other_job() -> None:
        plain_failure()

    instance = DagsterInstance.ephemeral()
    resource = MillraceClusterResource(provider="local", spark=SparkResource())
    result = millrace_job.execute_in_process(instance=instance, resources={"millrace": resource}, raise_on_error=False)
    assert not result.success
    tags = report_failed_run(instance, result)
    assert tags["millrace/failed_job_id"] == client.job_id
    assert tags["millrace/failed_job_status"] == "FAILED"
    assert "ValueError: record 7 is poisoned" in tags["millrace/failure_cause"]

    other = other_job.execute_in_process(instance=instance, raise_on_error=False)
    other_tags = report_failed_run(instance, other)
    assert not any(k.startswith("millrace/") for k in other_tags)
