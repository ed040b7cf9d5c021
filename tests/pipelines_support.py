"""Shared steps of the Dagster tests."""
from __future__ import annotations

from typing import Any

from dagster import DagsterInstance, build_run_status_sensor_context

from pipelines.sensors import millrace_failure_sensor


def report_failed_run(instance: DagsterInstance, result: Any) -> dict[str, str]:
    """Evaluate the run-failure sensor on a failed in-process run; return the run's tags afterwards."""
    ctx = build_run_status_sensor_context(
        sensor_name="millrace_failure_sensor", dagster_instance=instance,
        dagster_run=result.dagster_run, dagster_event=result.get_run_failure_event(),
    ).for_run_failure()
    millrace_failure_sensor(ctx)
    return dict(instance.get_run_by_id(result.run_id).tags)
