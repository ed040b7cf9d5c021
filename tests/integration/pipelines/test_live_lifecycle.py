"""The live running_totals lifecycle on a session cluster (local-process TaskManagers), driven by
the code location's jobs and sensor while the live events appender (pipelines/live_events.py, its
own process) appends to the live_events table: start from the last day's savepoint, scheduled
savepoints registered, a SIGKILLed TaskManager fails the job and the restore sensor brings it back
from its latest checkpoint, stop with a savepoint and start again from it; the Delta output is
checked row for row against an independent count: every (user, day) once, with exactly the totals
through that day."""
from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from dagster import DagsterInstance, RunRequest, SkipReason, build_sensor_context, materialize

from pipelines.daily_totals import daily_events, running_totals
from pipelines.jobs.daily_events import day_index, day_name
from pipelines.jobs.running_totals import live_job_name
from pipelines.live import millrace_restore_sensor, savepoint_live_jobs, start_live_running_totals_job, stop_live_with_savepoint
from pipelines.savepoint_registry import SavepointRegistry
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
from runtime.api.common.restart_strategy import RestartStrategies
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.storage.delta_read import read_table
from tests.integration.cluster.conftest import SessionCluster
from tests.running_totals_support import expected_by_day, live_appender, totals_by_user_day
from tests.waiting import wait_until

N = 2_000  # events per day: a live day lasts N / RATE seconds
RATE = 8_000


def _live(cluster: SessionCluster) -> dict[str, dict]:
    jobs = [j.model_dump(by_alias=True, mode="json") for j in cluster.client().list_jobs()]
    return {j["jid"]: j for j in jobs if j["name"].startswith("running_totals_live-from-")}


def _days(table: str) -> set[str]:
    try:
        return set(read_table(table, columns=["day"]).column("day").to_pylist())
    except Exception:  # noqa: BLE001 - no table yet
        return set()


def _days_out(table: str, *days: str) -> bool:
    return set(days) <= _days(table)


def _later(day: str, *k: int) -> list[str]:
    return [day_name(day_index(day) + i) for i in k]


def test_start_savepoint_kill_restore_stop(cluster: SessionCluster, tmp_path: Path) -> None:
    try:
        run_live_lifecycle(cluster, tmp_path)
    finally:  # a failure must not leave a live job running into the next test on this cluster
        for jid, job in _live(cluster).items():
            if job["state"] in ("CREATED", "RUNNING", "RESTARTING"):
                cluster.client().cancel_job(jid)


def run_live_lifecycle(cluster: SessionCluster, tmp_path: Path) -> None:
    """The appender appends the days from 2026-01-03 on at RATE events per second from the start;
    days 1-2 are backfilled, then the live job runs, both on `cluster` (its TaskManagers are up:
    no embedded cluster per day)."""
    instance = DagsterInstance.ephemeral()
    warehouse = DeltaWarehouseResource(base_path=str(tmp_path))
    session = MillraceClusterResource(mode="session", cluster_file=str(cluster.home), spark=SparkResource())
    appender = live_appender(warehouse.table_path("live_events"), RATE, N, "2026-01-03")
    try:
        for day in ("2026-01-01", "2026-01-02"):
            assert materialize(
                [daily_events, running_totals], partition_key=day, instance=instance,
                resources={"millrace": session, "warehouse": warehouse},
                run_config={"ops": {"daily_events": {"config": {"events_per_day": N}}}},
            ).success
        _live_lifecycle(cluster, instance, warehouse, session)
    finally:
        appender.stop()
    assert appender.committed() > 0 and appender.proc.returncode == -signal.SIGKILL  # it was appending to the end


def _live_lifecycle(cluster: SessionCluster, instance: DagsterInstance, warehouse: DeltaWarehouseResource, session: MillraceClusterResource) -> None:
    resources = {"millrace_session": session, "warehouse": warehouse}
    live_config = {"checkpoint_interval_ms": 300, "discovery_interval_ms": 100, "restart_attempts": 0}
    started = start_live_running_totals_job.execute_in_process(
        run_config={"ops": {"start_live_running_totals": {"config": live_config}}}, resources=resources, instance=instance
    )
    first_id = started.output_for_node("start_live_running_totals")
    assert _live(cluster)[first_id]["name"] == "running_totals_live-from-2026-01-03"  # the day after the last daily savepoint
    table = warehouse.table_path("running_totals")
    wait_until(lambda: _days_out(table, "2026-01-03", "2026-01-04"), timeout=60, what="live days in the output")

    # the (hourly) savepoint job registers a savepoint of the live job
    assert savepoint_live_jobs.execute_in_process(resources=resources, instance=instance).success
    registry = SavepointRegistry(warehouse)
    live_entries = registry.entries("running_totals_live")
    assert [e.partition for e in live_entries] == ["live-from-2026-01-03"] and Path(live_entries[0].path).is_dir()

    # a TaskManager dies while events come in: with no restarts left inside Millrace, the job FAILS
    completed = cluster.client().job_checkpoints(first_id).counts.completed
    wait_until(lambda: cluster.client().job_checkpoints(first_id).counts.completed >= completed + 2, timeout=60, what="a few more checkpoints")
    before_kill = max(_days(table))
    killed = {tm.id for tm in cluster.client().task_managers()}
    for tm in cluster.client().task_managers():
        os.kill(tm.pid, signal.SIGKILL)
    wait_until(lambda: _live(cluster)[first_id]["state"] == "FAILED", timeout=60, what="the live job to fail")
    # the sensor runs every 30 s: by then the cluster has noticed its dead TaskManagers
    wait_until(lambda: not killed & {tm.id for tm in cluster.client().task_managers()}, timeout=90, what="the dead TaskManagers to be gone")

    # the restore sensor restarts it from its latest checkpoint (the read positions in live_events with it), once
    with build_sensor_context(instance=instance, resources=resources) as ctx:
        request = millrace_restore_sensor(ctx)
        cursor = ctx.cursor
    assert isinstance(request, RunRequest), request
    op_config = request.run_config["ops"]["start_live_running_totals"]["config"]
    assert op_config["start_day"] == "2026-01-03" and first_id in op_config["reason"]
    assert op_config["restore_from"] == cluster.client().job_checkpoints(first_id).latest.completed.external_path
    with build_sensor_context(instance=instance, resources=resources, cursor=cursor) as again:
        assert isinstance(millrace_restore_sensor(again), SkipReason)  # handled: not restarted twice
    restarted = start_live_running_totals_job.execute_in_process(
        run_config={"ops": {"start_live_running_totals": {"config": {**live_config, **op_config}}}}, resources=resources, instance=instance
    )
    assert restarted.success
    second_id = restarted.output_for_node("start_live_running_totals")
    # two more whole days than the failed job had written, then a completed checkpoint of the new job
    later = _later(before_kill, 1, 2)
    wait_until(lambda: _days_out(table, *later), timeout=120, what=f"live days {later} after the restore")
    wait_until(lambda: cluster.client().job_checkpoints(second_id).latest.completed is not None, timeout=60, what="a checkpoint of the restored job")

    stopped = stop_live_with_savepoint.execute_in_process(resources=resources, instance=instance)
    assert stopped.success
    assert _live(cluster)[second_id]["state"] == "FINISHED"
    assert len(registry.entries("running_totals_live")) == 2

    # started again (the events appended meanwhile wait in the table): from the stop's savepoint, the newest registered
    at_stop = max(_days(table))
    again_id = start_live_running_totals_job.execute_in_process(
        run_config={"ops": {"start_live_running_totals": {"config": live_config}}}, resources=resources, instance=instance
    ).output_for_node("start_live_running_totals")
    assert _live(cluster)[again_id]["name"] == "running_totals_live-from-2026-01-03"
    later = _later(at_stop, 1, 2)
    wait_until(lambda: _days_out(table, *later), timeout=120, what=f"live days {later} after the start from the stop's savepoint")
    assert stop_live_with_savepoint.execute_in_process(resources=resources, instance=instance).success
    live_entries = registry.entries("running_totals_live")
    assert len(live_entries) == 3

    # retention through the savepoint job (nothing running: no new savepoint): newest 1 per job stays
    older = [*live_entries[1:], registry.lookup("running_totals", "2026-01-01")]
    kept = [live_entries[0], registry.lookup("running_totals", "2026-01-02")]
    assert savepoint_live_jobs.execute_in_process(
        run_config={"ops": {"dispose_old_savepoints": {"config": {"keep": 1}}}}, resources=resources, instance=instance
    ).success
    assert all(not Path(e.path).exists() for e in older) and all(Path(e.path).is_dir() for e in kept)
    assert {e.path for e in registry.entries()} == {e.path for e in kept}

    seen = totals_by_user_day(table)  # fails on a (user, day) written twice
    days = sorted({d for _, d in seen})
    assert days[:2] == ["2026-01-01", "2026-01-02"] and set(later) <= set(days)
    expected = expected_by_day(days, N)
    for day in days:
        rows = {u: t for (u, d), t in seen.items() if d == day}
        if day == days[-1]:  # maybe still open when stopped: some of its users
            assert rows.items() <= expected[day].items(), day
        else:
            assert rows == expected[day], day


def _poisoned(x: int) -> int:
    raise ValueError(f"injected failure at record {x}")


def _failed_live_job(cluster: SessionCluster, start_day: str) -> str:
    """A job named as the live job from `start_day` that FAILS at its first record (no restarts)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.set_restart_strategy(RestartStrategies.no_restart())
    env.from_collection([1, 2, 3]).map(_poisoned).name("poisoned").print()
    client = cluster.client()
    job_id = client.submit_job(env.get_job_graph(live_job_name(start_day)))
    wait_until(lambda: _live(cluster).get(job_id, {}).get("state") == "FAILED", timeout=60, what=f"job {job_id} to fail")
    return job_id


def test_the_restore_sensor_gives_up_after_three_restarts_in_an_hour(cluster: SessionCluster, tmp_path: Path) -> None:
    resources = {
        "millrace_session": MillraceClusterResource(mode="session", cluster_file=str(cluster.home), spark=SparkResource()),
        "warehouse": DeltaWarehouseResource(base_path=str(tmp_path)),
    }
    # whatever the test before left (it cancels its live jobs when it fails), nothing live is running
    wait_until(lambda: all(JobStatus(j["state"]).is_globally_terminal for j in _live(cluster).values()), timeout=60, what="no live job running")
    failed = _failed_live_job(cluster, "2026-01-09")
    now = time.time()
    with build_sensor_context(instance=DagsterInstance.ephemeral(), resources=resources,
                              cursor=json.dumps({"handled": [], "restarts": [now - 10, now - 20, now - 30]})) as ctx:
        out = millrace_restore_sensor(ctx)
        cursor = json.loads(ctx.cursor)
    assert isinstance(out, SkipReason) and "restart limit" in out.skip_message, out
    assert failed in cursor["handled"]  # given up on: not looked at again
