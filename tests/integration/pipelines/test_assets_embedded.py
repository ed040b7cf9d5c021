"""Assets materialized in-process (`materialize`) on embedded clusters with local-process TaskManagers:
results against plain-Python references, metadata, checks, the version sensor's pinned runs, the
failure sensor on a real failed job, and an interrupted run cancelling its Millrace job."""
from __future__ import annotations

import base64
import os
import signal
import threading
import time
from pathlib import Path

from dagster import AssetKey, DagsterInstance, asset, build_sensor_context, materialize
from deltalake import DeltaTable

from pipelines.assets import user_minute_totals, windowed_sum_table
from pipelines.definitions import asset_checks, defs
from pipelines.jobs import live_activity, windowed_sum
from pipelines.jobs import user_minute_totals as umt_program
from pipelines.sensors import windowed_sum_version_sensor
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
from runtime.api.common import Types
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from tests.pipelines_support import report_failed_run

EVENTS = 20_000


def _resources(base: Path) -> dict:
    return {
        "millrace": MillraceClusterResource(provider="local", spark=SparkResource(), progress_interval_s=1.0),
        "warehouse": DeltaWarehouseResource(base_path=str(base)),
    }


def _ws_config(events: int = EVENTS) -> dict:
    return {"ops": {"windowed_sum_table": {"config": {"events": events, "parallelism": 2}}}}


def _meta(result, node: str) -> dict:
    mat = result.asset_materializations_for_node(node)[0]
    return {k: v.value for k, v in mat.metadata.items()}


def _rows(path: str, version: int | None = None) -> list[dict]:
    return DeltaTable(path, version=version).to_pyarrow_table().to_pylist()


def test_both_assets_with_metadata_and_checks(tmp_path):
    instance = DagsterInstance.ephemeral()
    result = materialize(
        [windowed_sum_table, user_minute_totals, *asset_checks], resources=_resources(tmp_path), run_config=_ws_config(), instance=instance
    )
    assert result.success
    ws_path, umt_path = str(tmp_path / "windowed_sum"), str(tmp_path / "user_minute_totals")

    ref = windowed_sum.reference(EVENTS)
    got = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in _rows(ws_path)}
    assert got == ref
    ws_rows = _rows(ws_path)
    got_umt = {(r["user_id"], r["minute_start"]): (r["windows"], r["count"], r["sum"]) for r in _rows(umt_path)}
    assert got_umt == umt_program.reference(ws_rows)

    ws = _meta(result, "windowed_sum_table")
    assert len(ws["millrace_job_id"]) == 32 and ws["millrace_status"] == "FINISHED"
    assert ws["records_in"] == EVENTS and ws["records_out"] == ws["row_count"] == len(ref)
    assert ws["delta_table"] == ws_path and ws["delta_version"] == DeltaTable(ws_path).version()
    assert ws["chains"] == 2 and ws["parallelism"] == 2 and ws["slots"] == 2
    assert "HASH" in ws["plan"] and ws["duration_ms"] > 0
    # the plan's picture, as the Dagster UI gets it: from the instance's stored materialization
    event = instance.get_latest_materialization_event(AssetKey(["windowed_sum_table"]))
    assert event is not None and event.asset_materialization is not None
    picture = event.asset_materialization.metadata["plan_picture"].value
    assert picture.startswith("![plan of windowed_sum](data:image/svg+xml;base64,")
    svg = base64.b64decode(picture.split("base64,", 1)[1].rstrip(")")).decode()
    assert svg.startswith("<svg") and svg.count('<g class="node"') == ws["chains"] and "HASH" in svg
    umt = _meta(result, "user_minute_totals")
    assert umt["input_table"] == ws_path and umt["input_version"] == ws["delta_version"]
    assert umt["records_in"] == len(ref) and umt["row_count"] == len(got_umt)
    assert umt["millrace_job_id"] != ws["millrace_job_id"]

    evaluations = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert len(evaluations) == 6 and all(evaluations.values()), evaluations

    # the run log shows the job's progress: plan, status changes, records per chain
    logs = "\n".join(e.user_message for e in instance.all_logs(result.run_id))
    assert f"submitted as {ws['millrace_job_id']}" in logs and "-> RUNNING" in logs and "-> FINISHED" in logs
    assert f"in 0 out {EVENTS:,}" in logs


def test_sensor_runs_are_pinned_to_the_version_that_triggered_them(tmp_path):
    res = _resources(tmp_path)
    assert materialize([windowed_sum_table], resources=res, run_config=_ws_config(5_000)).success
    with build_sensor_context(resources={"warehouse": res["warehouse"]}) as ctx:
        (req_v0,) = windowed_sum_version_sensor.evaluate_tick(ctx).run_requests
    assert materialize([windowed_sum_table], resources=res, run_config=_ws_config(8_000)).success  # version 1

    assert defs.resolve_job_def("user_minute_totals_job").asset_layer.executable_asset_keys == {user_minute_totals.key}
    result = materialize([user_minute_totals], resources=res, run_config=req_v0.run_config)
    assert result.success
    assert _meta(result, "user_minute_totals")["input_version"] == 0
    out = {(r["user_id"], r["minute_start"]): (r["windows"], r["count"], r["sum"]) for r in _rows(str(tmp_path / "user_minute_totals"))}
    assert out == umt_program.reference(_rows(str(tmp_path / "windowed_sum"), version=0))
    assert out != umt_program.reference(_rows(str(tmp_path / "windowed_sum")))


@asset
def poisoned(context, millrace: MillraceClusterResource) -> None:
    def check(n: int) -> int:
        if n == 7:
            raise ValueError("record 7 is poisoned")
        return n

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(list(range(20)), type_info=Types.LONG()).map(check, output_type=Types.LONG()).print()
    millrace.run(env.get_job_graph("poisoned"), context=context)


def test_failed_job_is_reported_by_the_failure_sensor(tmp_path):
    instance = DagsterInstance.ephemeral()
    result = materialize([poisoned], resources=_resources(tmp_path), instance=instance, raise_on_error=False)
    assert not result.success
    tags = report_failed_run(instance, result)
    assert len(tags["millrace/failed_job_id"]) == 32 and tags["millrace/failed_job_status"] == "FAILED"
    assert "ValueError: record 7 is poisoned" in tags["millrace/failure_cause"]


def _live_children() -> set[int]:
    me, out = os.getpid(), set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(pid))
    return out


@asset
def endless(context, millrace: MillraceClusterResource) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    live_activity.build(env, rate=50)
    job = millrace.submit(env.get_job_graph("endless"), context=context)

    def interrupt_when_running() -> None:  # what terminating the run from the UI does to the step
        while millrace.status(job.job_id) is not JobStatus.RUNNING:
            time.sleep(0.1)
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    millrace.wait(job, context=context, timeout_s=120)  # never hang the suite


def test_interrupted_step_cancels_its_embedded_job(tmp_path):
    before = _live_children()
    instance = DagsterInstance.ephemeral()
    result = materialize([endless], resources=_resources(tmp_path), instance=instance, raise_on_error=False)
    assert not result.success
    logs = "\n".join(e.user_message for e in instance.all_logs(result.run_id))
    assert "cancelling the Millrace job" in logs and "is CANCELED after the cancel" in logs
    deadline = time.monotonic() + 10
    while _live_children() - before and time.monotonic() < deadline:  # the per-job cluster is gone
        time.sleep(0.2)
    assert not _live_children() - before
