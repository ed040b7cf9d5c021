"""The continuous DeltaSource on a cluster: it follows a table that another process appends to.

Every test runs windowed_sum_tail (continuous Delta source -> keyed 1 s event-time windows ->
Delta sink, exactly-once checkpoints) over commits written by benchmarks/delta_appender.py in its
own process, and checks the output table row for row against windowed_sum's plain-Python
reference over the same events: nothing read twice, nothing missed. The jobs end with a drained
stop-with-savepoint (the newest window fires only then), after the output holds every window that
the appended events close.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from benchmarks.delta_appender import AppenderProcess
from benchmarks.measure import check_windowed_sum
from pipelines.jobs import windowed_sum, windowed_sum_tail
from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.delta_source import DeltaSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.integration.runtime.test_savepoints import savepoint
from tests.waiting import job_details, wait_for_all_subtasks, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
ROWS = 400  # events per commit: 2.5 commits per 1 s window



def Appender(table: str, commits: int, first: int = 0, interval_ms: int = 60) -> AppenderProcess:
    return AppenderProcess(table, commits, first, ROWS, interval_ms)


def tail_env(parallelism: int, savepoint_path: str | None = None) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "10")
    conf.set_string("restart-strategy.fixed-delay.delay", "200 ms")
    if savepoint_path:
        conf.set_string("execution.savepoint.path", savepoint_path)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    return env


def closed_windows_written(output: str, events: int) -> bool:
    """The output holds every window the first `events` events close (all but the newest)."""
    if not (Path(output) / "_delta_log").exists():
        return False
    last_window = (windowed_sum.BASE_TS_MS + events - 1) // windowed_sum.WINDOW_MS * windowed_sum.WINDOW_MS
    expected = {k for k in windowed_sum.reference(events) if k[1] < last_window}
    got = {(r["user_id"], r["window_start"]) for r in DeltaTable(output).to_pyarrow_table(columns=["user_id", "window_start"]).to_pylist()}
    return expected <= got


def kill_a_task_manager(cluster: MiniCluster, job_id: str) -> str:
    """SIGKILL the process of a TaskManager that runs a task of the job; its id."""
    details = wait_for_all_subtasks(cluster, job_id)
    tm_ids = {s.tm_id for v in details.vertices for s in v.subtasks}
    victim = next(t for t in cluster.task_managers() if t.tm_id in tm_ids and t.pid)
    os.kill(victim.pid, signal.SIGKILL)
    return victim.tm_id


def test_follows_50_commits_through_two_killed_task_managers_exactly_once(cluster: MiniCluster, tmp_path: Path) -> None:
    table, out = str(tmp_path / "in"), str(tmp_path / "out")
    write_deltalake(table, pa.table({"user_id": pa.array([], pa.int64()), "ts_ms": pa.array([], pa.int64()), "value": pa.array([], pa.int64())}))
    env = tail_env(2)
    windowed_sum_tail.build(env, table, out, discovery_interval_ms=100, checkpoint_interval_ms=300)
    client = cluster.submit(env.get_job_graph("windowed_sum_tail"))
    appender = Appender(table, 50)
    try:
        wait_for_all_subtasks(cluster, client.job_id)
        killed = []
        for after_commits in (15, 35):
            wait_until(lambda n=after_commits: appender.committed() >= n, timeout=60, what=f"{after_commits} commits", interval=0.02)
            # a checkpoint of the job in the output's log (a restore point past the start), then the kill
            wait_until(lambda: (Path(out) / "_delta_log").exists(), timeout=60, what="the first sink commit", interval=0.05)
            killed.append(kill_a_task_manager(cluster, client.job_id))
        appender.wait()
        events = 50 * ROWS
        wait_until(lambda: closed_windows_written(out, events), timeout=120, what="every closed window in the output")
        status = savepoint(cluster, client.job_id, stop=True, drain=True, target=str(tmp_path / "sp"))
        assert status.status == "COMPLETED", status
        assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    finally:
        appender.stop()
    assert len(set(killed)) == 2
    check = check_windowed_sum(out, 50 * ROWS)
    assert check["verified"], check


def source_records_out(cluster: MiniCluster, job_id: str) -> int:
    """Records the job's source chain emitted so far (its current attempts)."""
    return sum(s.metrics.records_out for v in job_details(cluster, job_id).vertices if v.name.startswith("delta: events") for s in v.subtasks)


def test_stop_with_savepoint_and_restore_at_another_parallelism_reads_each_file_once(cluster: MiniCluster, tmp_path: Path) -> None:
    table, out = str(tmp_path / "in"), str(tmp_path / "out")
    Appender(table, 10, interval_ms=0).wait()  # versions 0..9: the initial snapshot
    env = tail_env(2)
    windowed_sum_tail.build(env, table, out, discovery_interval_ms=100, checkpoint_interval_ms=300)
    first = cluster.submit(env.get_job_graph("windowed_sum_tail"))
    appender = Appender(table, 20, first=10, interval_ms=40)
    try:
        wait_until(lambda: appender.committed() >= 8, timeout=60, what="8 more commits", interval=0.02)
        status = savepoint(cluster, first.job_id, stop=True, target=str(tmp_path / "sp"))  # mid-stream, no drain
        assert status.status == "COMPLETED" and status.location, status
        result = first.get_job_execution_result(timeout=60)
        assert result.status is JobStatus.FINISHED
        read_before = sum(m["records_out"] for name, m in result.metrics.items() if name.startswith("delta: events"))
        assert 0 < read_before < 30 * ROWS
        env = tail_env(3, status.location)  # restored at parallelism 3, while commits keep coming
        windowed_sum_tail.build(env, table, out, discovery_interval_ms=100, checkpoint_interval_ms=300)
        second = cluster.submit(env.get_job_graph("windowed_sum_tail"))
        appender.wait()
        # the moment the restored job has read every row the first one had not: then the drain fires every window
        wait_until(lambda: source_records_out(cluster, second.job_id) >= 30 * ROWS - read_before, timeout=120,
                   what="the restored job to read the rest of the table")
        status = savepoint(cluster, second.job_id, stop=True, drain=True, target=str(tmp_path / "sp"))
        assert status.status == "COMPLETED", status
        assert source_records_out(cluster, second.job_id) == 30 * ROWS - read_before  # no row read twice
    finally:
        appender.stop()
    check = check_windowed_sum(out, 30 * ROWS)
    assert check["verified"], check


def test_a_delete_fails_the_job_naming_its_version_and_ignore_deletes_goes_on(cluster: MiniCluster, tmp_path: Path) -> None:
    table = str(tmp_path / "in")
    rows = pa.table({"id": pa.array(range(6), pa.int64()), "part": pa.array([i % 2 for i in range(6)], pa.int64())})
    write_deltalake(table, rows, partition_by=["part"])  # version 0
    clients = {}
    for ignore in (False, True):
        env = tail_env(1)
        env.enable_checkpointing(300)
        b = DeltaSource.for_table(table).continuous(100)
        src = (b.ignore_deletes() if ignore else b).build()
        out = str(tmp_path / f"out-{ignore}")
        env.from_source(src, WatermarkStrategy.no_watermarks(), "delta in").sink_to(DeltaSink.for_path(out))
        clients[ignore] = (cluster.submit(env.get_job_graph(f"delete-{ignore}")), out)
    for _, out in clients.values():  # both read version 0 first
        wait_until(lambda out=out: (Path(out) / "_delta_log").exists() and DeltaTable(out).to_pyarrow_table().num_rows == 6,
                   timeout=60, what="version 0 in the output")
    DeltaTable(table).delete("part = 1")  # version 1: removes a partition's file
    write_deltalake(table, pa.table({"id": pa.array([100, 101], pa.int64()), "part": pa.array([0, 0], pa.int64())}), mode="append")
    failing, _ = clients[False]
    result = failing.wait_result_message(timeout=60)
    assert result.status is JobStatus.FAILED and result.error is not None
    assert "version 1 (DELETE) deleted data" in result.error.describe(), result.error.describe()
    going, out = clients[True]
    wait_until(lambda: sorted(DeltaTable(out).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3, 4, 5, 100, 101],
               timeout=60, what="version 2's rows after the skipped delete")
    assert going.get_job_status() is JobStatus.RUNNING
    going.cancel()
