"""The code location: lineage between the table assets, run config the launchpad shows and checks."""
from __future__ import annotations

import pytest
from dagster import AssetKey, DagsterInvalidConfigError, validate_run_config

from pipelines.definitions import defs

pytestmark = pytest.mark.unit


def test_asset_graph_has_the_lineage():
    graph = defs.resolve_asset_graph()
    assert graph.get(AssetKey("user_minute_totals")).parent_keys == {AssetKey("windowed_sum_table")}
    # a day of running_totals needs that day's events and its own previous day (a backfill runs in order)
    totals = graph.get(AssetKey("running_totals"))
    assert totals.parent_keys == {AssetKey("daily_events"), AssetKey("running_totals")}
    mapping = totals.partition_mappings[AssetKey("running_totals")]
    assert (mapping.start_offset, mapping.end_offset) == (-1, -1)
    assert totals.partitions_def.get_first_partition_key() == "2026-01-01"
    assert {c.name for c in totals.check_keys} == {"totals_carry_forward"}
    # the live events continue the daily ones
    assert graph.get(AssetKey("live_events")).parent_keys == {AssetKey("daily_events")}


def test_launchpad_config_is_typed_and_documented():
    asset_job = defs.resolve_implicit_global_asset_job_def()
    ops = asset_job.run_config_schema.config_type.fields["ops"].config_type.fields
    fields = ops["windowed_sum_table"].config_type.fields["config"].config_type.fields
    assert {"events", "parallelism", "output", "per_record"} <= set(fields)
    assert all(f.description for f in fields.values())
    assert fields["events"].default_value == 2_000_000
    resources = asset_job.run_config_schema.config_type.fields["resources"].config_type.fields
    millrace = resources["millrace"].config_type.fields["config"].config_type.fields
    assert millrace["mode"].default_value == "embedded" and millrace["provider"].default_value == "spark"

    ok = {"ops": {"windowed_sum_table": {"config": {"events": 10, "parallelism": 1}}}, "resources": {"millrace": {"config": {"provider": "local"}}}}
    assert validate_run_config(asset_job, ok)
    for bad in (
        {"ops": {"windowed_sum_table": {"config": {"events": "many"}}}},
        {"ops": {"windowed_sum_table": {"config": {"evnets": 10}}}},
        {"resources": {"millrace": {"config": {"provider": "yarn"}}}},
    ):
        with pytest.raises(DagsterInvalidConfigError):
            validate_run_config(asset_job, bad)


def test_jobs_sensors_and_schedule_are_registered():
    repo = defs.get_repository_def()
    assert {"daily_tables_job", "user_minute_totals_job", "submit_live_activity_job", "cancel_live_activity_job"} <= set(repo.job_names)
    assert {s.name for s in repo.sensor_defs} == {
        "windowed_sum_version_sensor", "millrace_failure_sensor", "millrace_restore_sensor", "millrace_autoscaling_sensor",
    }
    assert {s.name for s in repo.schedule_defs} == {"daily_tables_schedule", "savepoint_live_jobs_schedule", "live_events_schedule"}
    assert defs.get_schedule_def("savepoint_live_jobs_schedule").cron_schedule == "0 * * * *"
    assert defs.get_schedule_def("live_events_schedule").cron_schedule == "* * * * *"
    for name in (
        "submit_live_activity_job", "cancel_live_activity_job", "start_live_running_totals_job", "savepoint_live_jobs", "stop_live_with_savepoint",
        "apply_millrace_rescale",
    ):
        assert "millrace_session" in defs.resolve_job_def(name).required_resource_keys
    # the Kafka topic of the live job (source: kafka) is fed a day at a time by a Millrace job
    assert {"millrace", "warehouse"} <= defs.resolve_job_def("events_to_kafka_job").required_resource_keys


def test_the_live_jobs_launchpad_config_names_the_live_table_not_a_rate():
    ops = defs.resolve_job_def("start_live_running_totals_job").run_config_schema.config_type.fields["ops"].config_type.fields
    fields = ops["start_live_running_totals"].config_type.fields["config"].config_type.fields
    assert set(fields) == {
        "parallelism", "checkpoint_interval_ms", "discovery_interval_ms", "starting_version", "restart_attempts", "restore_from", "start_day", "reason",
        "source", "bootstrap_servers", "topic",
    }
    assert all(f.description for f in fields.values())
    # the rate and the events per day belong to the appender (the live_events asset, pipelines/live_events.py)
    appends = defs.resolve_job_def("live_events_job").run_config_schema.config_type.fields["ops"].config_type.fields
    assert set(appends["live_events"].config_type.fields["config"].config_type.fields) == {"events", "events_per_day", "start_day"}
