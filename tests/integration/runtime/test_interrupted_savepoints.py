"""Savepoints that do not end as asked (issue 24, output safety):

- a cancel during a savepoint or a stop-with-savepoint leaves nothing in the savepoint's folder (no
  Parquet file, no `.inprogress` temp file, no folder), also from snapshot writers that finish after
  the savepoint was aborted, and no uncommitted part file in the output table;
- a stop-with-savepoint whose sink commit fails reports FAILED ("the savepoint exists but the job
  did not stop"), the job goes on, and pipelines/live.py registers nothing.

The moment of the cancel is found, not guessed: a state-file write hook (set in the TaskManagers by
the job's own map function) holds the savepoint's snapshot writers until the test lets them go.
Outputs are checked row for row (the ids 0..N-1, each exactly once).
"""
from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.common.restart_strategy import RestartStrategies
from runtime.api.connectors.delta import DeltaSink, DeltaSinkCoordinator
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.functions import MapFunction
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.rpc import messages as m
from tests.integration.runtime.test_fault_tolerance import assert_exactly_once, id_source
from tests.waiting import wait_for_all_subtasks, wait_until

pytestmark = pytest.mark.integration


class HoldSavepointWrites(MapFunction):
    """A map that passes batches on; its open() installs, in its TaskManager process, a hook on the
    state-file writer: a write into the savepoint's folder announces itself (a file `entered-*`),
    waits until the file `release` exists, and says when its file is in place (`written-*`)."""

    def __init__(self, savepoint_base: str, signals: str) -> None:
        self.savepoint_base, self.signals = savepoint_base, signals

    def open(self, runtime_context: Any = None) -> None:
        import runtime.storage.state_files as state_files

        state_files.write_hook = _Hold(self.savepoint_base, self.signals)

    def map(self, batch: Any) -> Any:
        return batch


class _Hold:
    def __init__(self, savepoint_base: str, signals: str) -> None:
        self.savepoint_base, self.signals = savepoint_base, signals

    def __call__(self, stage: str, path: str) -> None:
        if not path.startswith(self.savepoint_base):
            return
        name = f"{os.getpid()}-{os.path.basename(path)}"
        if stage == "writing":
            open(os.path.join(self.signals, f"entered-{name}"), "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(os.path.join(self.signals, "release")) and time.monotonic() < deadline:
                time.sleep(0.01)
        elif stage == "written":
            open(os.path.join(self.signals, f"written-{name}"), "w").close()


def _signals(folder: Path, kind: str) -> list[str]:
    return sorted(p.name for p in folder.glob(f"{kind}-*"))


def held_program(tmp_path: Path, n: int, rate: int) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    conf.set_string("state.savepoints.dir", str(tmp_path / "sp"))
    # snapshot writers on threads: nothing kills them on cancel, so they finish after the abort
    conf.set_string("state.snapshot.async-mode", "thread")
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(600_000, CheckpointingMode.EXACTLY_ONCE)  # none during the test: only the savepoint
    (
        env.from_source(id_source(n, rate), WatermarkStrategy.no_watermarks(), "ids").uid("ids")
        .map_batches(HoldSavepointWrites(str(tmp_path / "sp"), str(tmp_path / "signals"))).name("hold").uid("hold")
        .sink_to(DeltaSink(str(tmp_path / "out"))).uid("sink")
    )
    return env


def _savepoint_in_progress(cluster: MiniCluster, job_id: str) -> bool:
    stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=10)
    history = json.loads(stats.statistics_json)["history"]
    return any(e["is_savepoint"] and e["status"] == "IN_PROGRESS" for e in history)


def _savepoint_failed(cluster: MiniCluster, job_id: str) -> bool:
    stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=10)
    history = json.loads(stats.statistics_json)["history"]
    return any(e["is_savepoint"] and e["status"] == "FAILED" for e in history)


def uncommitted_part_files(table: Path) -> list[str]:
    """Parquet files in the table's folder that its Delta log does not reference."""
    from urllib.parse import unquote

    on_disk = {str(p.relative_to(table)) for p in table.rglob("*.parquet") if "_delta_log" not in p.parts}
    if not (table / "_delta_log").is_dir():
        return sorted(on_disk)
    import pyarrow as pa
    from deltalake import DeltaTable

    referenced = {unquote(p) for p in pa.table(DeltaTable(str(table)).get_add_actions(flatten=True)).column("path").to_pylist()}
    return sorted(on_disk - referenced)


@pytest.mark.parametrize("stop", [False, True], ids=["savepoint", "stop-with-savepoint"])
def test_a_cancel_during_a_savepoint_leaves_nothing_behind(mini_cluster: MiniCluster, tmp_path: Path, stop: bool) -> None:
    signals = tmp_path / "signals"
    signals.mkdir()
    client = mini_cluster.submit(held_program(tmp_path, 400_000, 20_000).get_job_graph("held-savepoint"))
    wait_for_all_subtasks(mini_cluster, client.job_id)
    gw = mini_cluster.dispatcher_gateway()
    trigger = gw.call_sync("trigger_savepoint", m.TriggerSavepoint(job_id=client.job_id, stop=stop), timeout=10)
    # the savepoint is under way: both source subtasks' writers are in it, held, and it is IN_PROGRESS
    wait_until(lambda: len(_signals(signals, "entered")) == 2, what="both snapshot writers inside the savepoint")
    assert _savepoint_in_progress(mini_cluster, client.job_id)
    client.cancel()
    # the JobMaster gave the savepoint up (and cleaned what it knew of); only then do the writers go on
    wait_until(lambda: _savepoint_failed(mini_cluster, client.job_id), what="the savepoint aborted")
    (signals / "release").touch()
    wait_until(lambda: client.get_job_status() is JobStatus.CANCELED, what="the job CANCELED")
    # the late writers did write (each says so once its file is in place) ...
    wait_until(lambda: len(_signals(signals, "written")) == 2, what="both late writers done")
    status = gw.call_sync("request_savepoint_status", m.SavepointStatusRequest(job_id=client.job_id, trigger_id=trigger.trigger_id), timeout=10)
    assert status.status == "FAILED", status
    # ... and nothing of the savepoint is left: no state file, no temp file, no folder
    left = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "sp").rglob("*")) if (tmp_path / "sp").exists() else []
    assert left == [], left
    # the output table holds only committed files (none: no checkpoint completed)
    assert not (tmp_path / "out").exists() or uncommitted_part_files(tmp_path / "out") == []


# --- a stop-with-savepoint whose sink commit fails ---------------------------------------------------
@pytest.fixture
def failing_savepoint_commits() -> Iterator[list[int]]:
    """While the list holds True, the Delta sink's commit of a completed checkpoint or savepoint raises."""
    armed: list[int] = []

    def fail(checkpoint_id: int) -> None:
        if armed:
            raise OSError(f"injected: the sink's commit of savepoint {checkpoint_id} failed")

    DeltaSinkCoordinator.before_commit = fail
    try:
        yield armed
    finally:
        DeltaSinkCoordinator.before_commit = None


def stop_program(tmp_path: Path, n: int, rate: int) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(600_000, CheckpointingMode.EXACTLY_ONCE)  # restarts on; no periodic checkpoint in the test
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 200))
    (
        env.from_source(id_source(n, rate), WatermarkStrategy.no_watermarks(), "ids").uid("ids")
        .sink_to(DeltaSink(str(tmp_path / "out"))).uid("sink")
    )
    return env


def test_a_stop_whose_sink_commit_fails_reports_failed_and_live_registers_nothing(
    mini_cluster: MiniCluster, tmp_path: Path, failing_savepoint_commits: list[int]
) -> None:
    from dagster import DagsterInstance

    from pipelines.jobs.running_totals import live_job_name
    from pipelines.live import stop_live_with_savepoint
    from pipelines.savepoint_registry import SavepointRegistry
    from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
    from runtime.storage.savepoints import read_savepoint
    from tests.integration.rest.conftest import TOKEN, serve_rest

    n = 300_000
    client = mini_cluster.submit(stop_program(tmp_path, n, 15_000).get_job_graph(live_job_name("2026-01-03")))
    wait_for_all_subtasks(mini_cluster, client.job_id)
    failing_savepoint_commits.append(1)
    with serve_rest(mini_cluster) as rest_cluster:
        rest = rest_cluster.client()
        trigger = rest.stop_with_savepoint(client.job_id, str(tmp_path / "sp"))
        status = wait_until(lambda: (lambda s: s if s.status.id != "IN_PROGRESS" else None)(rest.savepoint_status(client.job_id, trigger)),
                            what="the stop to end")
        assert status.status.id == "COMPLETED" and status.operation is not None  # Flink: the operation completed ...
        cause = "; ".join(status.operation.failure_cause.errors) if status.operation.failure_cause else ""
        assert status.operation.location is None, status  # ... with a failure, not a location
        assert "did not stop" in cause and "injected: the sink's commit of savepoint" in cause, cause
        where = cause.split("exists at ", 1)[1].split(",", 1)[0].split(" ", 1)[0]
        assert read_savepoint(where).is_savepoint  # the savepoint itself is there, as the message says
        # the job was not stopped: it restarts from that savepoint and runs on
        assert client.get_job_status() is not JobStatus.FINISHED
        wait_for_all_subtasks(mini_cluster, client.job_id)

        # pipelines/live.py: the stop op fails and registers nothing
        warehouse = DeltaWarehouseResource(base_path=str(tmp_path / "warehouse"))
        session = MillraceClusterResource(mode="session", url=rest_cluster.url, token=TOKEN, spark=SparkResource())
        result = stop_live_with_savepoint.execute_in_process(
            resources={"millrace_session": session, "warehouse": warehouse}, instance=DagsterInstance.ephemeral(), raise_on_error=False,
        )
        assert not result.success
        failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.error
        assert "did not stop" in str(failure), failure
        assert SavepointRegistry(warehouse).entries() == []
    failing_savepoint_commits.clear()
    assert client.get_job_status() is not JobStatus.FINISHED
    result = client.get_job_execution_result(timeout=180)  # the bounded input ends: the job FINISHES by itself
    assert result.status is JobStatus.FINISHED and result.accumulators.get("savepoint_path") is None
    assert result.accumulators["restarts"] >= 2
    assert_exactly_once(tmp_path / "out", n)
