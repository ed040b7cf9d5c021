"""The cluster resource in session mode against a session cluster (local-process TaskManagers):
assets run there, the streaming job is submitted detached and cancelled by name, and an
interrupted Dagster run cancels its attached job."""
from __future__ import annotations

import os
import re
import signal
import threading
import time

from dagster import DagsterInstance, EnvVar, asset, materialize
from deltalake import DeltaTable

from pipelines.assets import user_minute_totals, windowed_sum_table
from pipelines.jobs import live_activity, windowed_sum
from pipelines.streaming import cancel_live_activity_job, submit_live_activity_job
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
from runtime.api.datastream import StreamExecutionEnvironment
from tests.integration.cluster.conftest import SessionCluster
from tests.waiting import wait_until


def _session(cluster: SessionCluster, **kw) -> MillraceClusterResource:
    return MillraceClusterResource(mode="session", cluster_file=str(cluster.home), spark=SparkResource(), **kw)


def _states(cluster: SessionCluster, name: str) -> dict[str, str]:
    jobs = [j.model_dump(by_alias=True, mode="json") for j in cluster.client().list_jobs()]
    return {j["jid"]: j["state"] for j in jobs if j["name"] == name}


def test_assets_run_on_the_session_cluster(cluster, tmp_path):
    instance = DagsterInstance.ephemeral()
    resources = {"millrace": _session(cluster, progress_interval_s=0.2), "warehouse": DeltaWarehouseResource(base_path=str(tmp_path))}
    events = 400_000
    result = materialize(
        [windowed_sum_table, user_minute_totals], resources=resources, instance=instance,
        # the per-record path (~250k events/s at p=2): the job runs long enough for progress lines with records
        run_config={"ops": {"windowed_sum_table": {"config": {"events": events, "per_record": True}}}},
    )
    assert result.success
    ids = {n: result.asset_materializations_for_node(n)[0].metadata["millrace_job_id"].value for n in ("windowed_sum_table", "user_minute_totals")}
    # the jobs ran on the cluster (its REST API knows them), not in this process
    assert _states(cluster, "windowed_sum") .get(ids["windowed_sum_table"]) == "FINISHED"
    assert _states(cluster, "user_minute_totals").get(ids["user_minute_totals"]) == "FINISHED"
    rows = DeltaTable(str(tmp_path / "windowed_sum")).to_pyarrow_table().to_pylist()
    assert {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows} == windowed_sum.reference(events)
    logs = "\n".join(e.user_message for e in instance.all_logs(result.run_id))
    assert "to the session cluster http://127.0.0.1:" in logs and "-> FINISHED" in logs
    assert re.search(r"RUNNING for \d+ s - .*: in [\d,]+ out [1-9][\d,]*", logs), logs  # progress with records (REST)


def test_detached_streaming_job_outlives_the_run_and_is_cancelled_by_name(cluster, monkeypatch):
    # URL and token from the environment, as definitions.py wires them
    monkeypatch.setenv("MILLRACE_URL", cluster.url)
    monkeypatch.setenv("MILLRACE_TOKEN", cluster.token)
    session = MillraceClusterResource(mode="session", url=EnvVar("MILLRACE_URL"), token=EnvVar("MILLRACE_TOKEN"), spark=SparkResource())
    res = {"millrace_session": session}
    cfg = {"ops": {"submit_live_activity": {"config": {"name": "live-test", "rate": 50}}}}

    t0 = time.monotonic()
    first = submit_live_activity_job.execute_in_process(resources=res, run_config=cfg)
    assert first.success and time.monotonic() - t0 < 30  # returned while the job runs on
    job_id = first.output_for_node("submit_live_activity")
    wait_until(lambda: _states(cluster, "live-test").get(job_id) == "RUNNING", what="streaming job running")
    time.sleep(1.0)
    assert _states(cluster, "live-test")[job_id] == "RUNNING"  # still running after the Dagster run ended

    again = submit_live_activity_job.execute_in_process(resources=res, run_config=cfg, raise_on_error=False)
    assert not again.success  # one live-test at a time unless asked to replace it
    replace = {"ops": {"submit_live_activity": {"config": {"name": "live-test", "rate": 50, "replace_running": True}}}}
    second = submit_live_activity_job.execute_in_process(resources=res, run_config=replace)
    new_id = second.output_for_node("submit_live_activity")
    assert new_id != job_id and _states(cluster, "live-test")[job_id] == "CANCELED"

    cancel = cancel_live_activity_job.execute_in_process(resources=res, run_config={"ops": {"cancel_live_activity": {"config": {"name": "live-test"}}}})
    assert cancel.success and cancel.output_for_node("cancel_live_activity") == [new_id]
    assert _states(cluster, "live-test") == {job_id: "CANCELED", new_id: "CANCELED"}
    nothing = cancel_live_activity_job.execute_in_process(resources=res, run_config={"ops": {"cancel_live_activity": {"config": {"name": "live-test"}}}})
    assert nothing.success and nothing.output_for_node("cancel_live_activity") == []


@asset
def attached_endless(context, millrace: MillraceClusterResource) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    live_activity.build(env, rate=50)
    millrace.run(env.get_job_graph("attached-endless"), context=context, timeout_s=120)  # never hang the suite


def test_interrupted_run_cancels_its_session_job(cluster):
    def interrupt_when_running() -> None:  # what terminating the run from the UI does to the step
        wait_until(lambda: "RUNNING" in _states(cluster, "attached-endless").values(), what="attached job running")
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_when_running, daemon=True).start()
    result = materialize([attached_endless], resources={"millrace": _session(cluster)}, raise_on_error=False)
    assert not result.success
    assert list(_states(cluster, "attached-endless").values()) == ["CANCELED"]
