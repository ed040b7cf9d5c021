"""Checkpoints, restarts, region failover and the exactly-once Delta sink, with real injected failures.

Every test checks the Delta output row for row against the plain-Python reference (the ids
0..N-1, each exactly once).
"""
from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.common.restart_strategy import RestartStrategies
from runtime.api.connectors.delta import DeltaSink, DeltaSinkCoordinator
from runtime.api.connectors.generator import DataGeneratorSource, RateLimiterStrategy
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.errors import JobExecutionError
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.rest.client import RestClusterClient
from runtime.rpc import messages as m
from tests.integration.rest.conftest import serve_rest
from tests.waiting import wait_until


def ids(i: np.ndarray) -> dict[str, np.ndarray]:
    return {"id": i}


def read_ids(path: Path) -> list[int]:
    from deltalake import DeltaTable

    return sorted(DeltaTable(str(path)).to_pyarrow_table(columns=["id"]).column("id").to_pylist())


def assert_exactly_once(path: Path, n: int) -> None:
    got = read_ids(path)
    dupes = len(got) - len(set(got))
    missing = sorted(set(range(n)) - set(got))
    assert dupes == 0 and not missing and len(got) == n, f"{dupes} duplicated, {len(missing)} missing (first {missing[:5]}), {len(got)} rows"


def env_with_checkpoints(tmp_path: Path, parallelism: int, interval_ms: int = 200, conf: Configuration | None = None) -> StreamExecutionEnvironment:
    conf = conf or Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(interval_ms, CheckpointingMode.EXACTLY_ONCE)
    return env


def id_source(n: int, rate: int) -> DataGeneratorSource:
    return DataGeneratorSource(None, n, batch_generator=ids, rate_limiter_strategy=RateLimiterStrategy.per_second(rate))


class FailOnce:
    """Raises at record `at` the first time only (a marker file shared by every TaskManager process)."""

    def __init__(self, at: int, marker: Path) -> None:
        self.at, self.marker = at, str(marker)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if (batch["id"] == self.at).any() and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise ValueError(f"injected failure at record {self.at}")
        return batch


class FailAlways:
    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if (batch["id"] == self.at).any():
            raise ValueError(f"record {self.at} is poisoned")
        return batch


def wait_for_checkpoints(cluster: MiniCluster, job_id: str, n: int, timeout: float = 60) -> None:
    def done() -> bool:
        stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=10)
        return json.loads(stats.statistics_json)["counts"]["completed"] >= n

    wait_until(done, timeout=timeout, what=f"{n} completed checkpoints")


def test_an_exception_raised_once_is_survived_and_every_row_lands_exactly_once(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 60_000
    env = env_with_checkpoints(tmp_path, 2)
    (
        env.from_source(id_source(n, 20_000), WatermarkStrategy.no_watermarks(), "ids")
        .map_batches(FailOnce(n // 2, tmp_path / "failed-once"))
        .name("fail once")
        .sink_to(DeltaSink(str(tmp_path / "out")))
    )
    client = mini_cluster.submit(env.get_job_graph("fail-once"))
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["restarts"] == 1
    assert (tmp_path / "failed-once").exists()
    assert_exactly_once(tmp_path / "out", n)
    exceptions = mini_cluster.dispatcher_gateway().call_sync("request_job_exceptions", m.JobIdMessage(job_id=client.job_id), timeout=10)
    assert exceptions.num_restarts == 1
    assert "injected failure at record 30000" in exceptions.entries[0].error.message


def test_an_exception_raised_every_time_exhausts_fixed_delay_and_names_the_cause_and_attempts(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    env = env_with_checkpoints(tmp_path, 1)
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 100))
    (
        env.from_source(id_source(20_000, 20_000), WatermarkStrategy.no_watermarks(), "ids")
        .map_batches(FailAlways(5_000))
        .name("poisoned")
        .sink_to(DeltaSink(str(tmp_path / "out")))
    )
    client = mini_cluster.submit(env.get_job_graph("always-fails"))
    with pytest.raises(JobExecutionError) as info:
        client.get_job_execution_result(timeout=120)
    text = str(info.value)
    assert "record 5000 is poisoned" in text
    assert "3 restarts" in text and "fixed-delay" in text
    exceptions = mini_cluster.dispatcher_gateway().call_sync("request_job_exceptions", m.JobIdMessage(job_id=client.job_id), timeout=10)
    assert exceptions.num_restarts == 3 and len(exceptions.entries) == 4


def rest_attempts(rest: RestClusterClient, job_id: str) -> dict[tuple[str, int], tuple[int, ExecutionState, str | None]]:
    """(vertex, subtask) -> (attempt, state, TaskManager id), read over HTTP: GET /jobs/{id}."""
    return {(v.name, s.subtask): (s.attempt, ExecutionState(s.status), s.taskmanager_id) for v in rest.job_details(job_id).vertices for s in v.subtasks}


def test_region_failover_restarts_only_the_pipeline_of_the_lost_task_manager(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    """Four independent pipelines (source -> map -> sink, p=4, no exchange); one TaskManager is
    SIGKILLed; GET /jobs/{id} shows new attempts for exactly that pipeline's tasks."""
    n = 200_000
    env = env_with_checkpoints(tmp_path, 4)
    (
        env.from_source(id_source(n, 40_000), WatermarkStrategy.no_watermarks(), "ids")
        .map_batches(lambda b: b)
        .name("identity")
        .disable_chaining()  # three tasks per pipeline, so "only that pipeline" is about more than one task
        .sink_to(DeltaSink(str(tmp_path / "out")))
    )
    with serve_rest(mini_cluster) as rc:
        rest = rc.client()
        client = mini_cluster.submit(env.get_job_graph("four-pipelines"))
        tms = mini_cluster.wait_for_task_managers(4, timeout=60)
        wait_until(lambda: all(st is ExecutionState.RUNNING for _, st, _ in rest_attempts(rest, client.job_id).values()), timeout=60, what="all running")
        wait_for_checkpoints(mini_cluster, client.job_id, 2)
        before = rest_attempts(rest, client.job_id)
        assert len(before) == 12
        victim = tms[0]
        victim_subtasks = {k for k, (_, _, tm) in before.items() if tm == victim.tm_id}
        assert victim_subtasks and len({i for _, i in victim_subtasks}) == 1, f"one pipeline per TaskManager: {victim_subtasks}"
        os.kill(victim.pid, signal.SIGKILL)
        wait_until(lambda: JobStatus(rest.job_details(client.job_id).state).is_globally_terminal, timeout=120, what="the job ended")
        after = rest_attempts(rest, client.job_id)
        assert JobStatus(rest.job_details(client.job_id).state) is JobStatus.FINISHED
    restarted = {k for k in after if after[k][0] > before[k][0]}
    assert restarted == victim_subtasks, f"restarted {restarted}, lost {victim_subtasks}"
    assert_exactly_once(tmp_path / "out", n)


@pytest.fixture
def before_commit_hook() -> Iterator[list[Any]]:
    calls: list[Any] = []
    yield calls
    DeltaSinkCoordinator.before_commit = None


def test_a_task_manager_killed_after_a_checkpoint_completed_but_before_its_commit(
    mini_cluster: MiniCluster, tmp_path: Path, before_commit_hook: list[Any]
) -> None:
    n = 80_000
    env = env_with_checkpoints(tmp_path, 2)
    (
        env.from_source(id_source(n, 20_000), WatermarkStrategy.no_watermarks(), "ids")
        .map_batches(lambda b: b)
        .name("identity")
        .sink_to(DeltaSink(str(tmp_path / "out")))
    )

    def kill_then_fail(checkpoint_id: int) -> None:
        before_commit_hook.append(checkpoint_id)
        if checkpoint_id == 3 and len([c for c in before_commit_hook if c == 3]) == 1:
            os.kill(mini_cluster.task_managers()[0].pid, signal.SIGKILL)
            raise OSError("injected: the JobManager lost its storage before committing checkpoint 3")

    DeltaSinkCoordinator.before_commit = kill_then_fail
    client = mini_cluster.submit(env.get_job_graph("kill-before-commit"))
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["restarts"] >= 1
    assert_exactly_once(tmp_path / "out", n)
    # checkpoint 3's files were committed exactly once (on restore), under the sink's app transaction
    assert txn_versions(tmp_path / "out").count(3) == 1


def test_a_job_failing_between_a_completed_checkpoint_and_its_commit_keeps_its_files_for_a_restore(
    mini_cluster: MiniCluster, tmp_path: Path, before_commit_hook: list[Any]
) -> None:
    """No restarts: the failed commit of checkpoint 3 FAILS the job. Its files must outlive the job
    (checkpoints are retained), so a new run restored from the checkpoint commits them."""
    n = 60_000

    def build(restore: str | None) -> StreamExecutionEnvironment:
        conf = Configuration()
        if restore:
            conf.set_string("execution.savepoint.path", restore)
        env = env_with_checkpoints(tmp_path, 2, conf=conf)
        env.set_restart_strategy(RestartStrategies.no_restart())
        (
            env.from_source(id_source(n, 20_000), WatermarkStrategy.no_watermarks(), "ids").uid("ids")
            .map_batches(lambda b: b).name("identity").uid("identity")
            .sink_to(DeltaSink(str(tmp_path / "out"))).uid("out")
        )
        return env

    def fail_commit_3(checkpoint_id: int) -> None:
        before_commit_hook.append(checkpoint_id)
        if checkpoint_id == 3:
            raise OSError("injected: the commit of checkpoint 3 failed")

    DeltaSinkCoordinator.before_commit = fail_commit_3
    failed = mini_cluster.submit(build(None).get_job_graph("fail-before-commit"))
    with pytest.raises(JobExecutionError, match="checkpoint 3"):
        failed.get_job_execution_result(timeout=120)
    assert max(txn_versions(tmp_path / "out")) == 2  # checkpoints 1 and 2 committed, 3 not
    DeltaSinkCoordinator.before_commit = None

    restored = mini_cluster.submit(build(str(tmp_path / "checkpoints" / failed.job_id)).get_job_graph("restored"))
    assert restored.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert_exactly_once(tmp_path / "out", n)
    assert txn_versions(tmp_path / "out").count(3) == 1  # checkpoint 3's files, committed by the restore


def txn_versions(table: Path) -> list[int]:
    """The app-transaction versions of every commit in a Delta log, in order."""
    out = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        for line in f.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                out.append(int(action["txn"]["version"]))
    return out


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb-incremental"])
def test_checkpoints_are_delta_commits_and_only_the_retained_ones_stay(mini_cluster: MiniCluster, tmp_path: Path, backend: str) -> None:
    from deltalake import DeltaTable

    from runtime.storage.checkpoint_store import CheckpointStore
    from runtime.storage.state_files import checkpoint_of_path

    n = 60_000
    conf = Configuration()
    conf.set_string("state.checkpoints.num-retained", "2")
    if backend == "rocksdb-incremental":  # chains of a few logs, re-materialized every 600 ms
        conf.set_string("state.backend.type", "rocksdb")
        conf.set_string("state.backend.incremental", "true")
        conf.set_string("state.changelog.periodic-materialize.interval", "600 ms")
    env = env_with_checkpoints(tmp_path, 2, interval_ms=150, conf=conf)
    source = DataGeneratorSource(lambda i: i, n, rate_limiter_strategy=RateLimiterStrategy.per_second(20_000))
    env.from_source(source, WatermarkStrategy.no_watermarks(), "ints").key_by(lambda x: x % 100).reduce(lambda a, b: a + b).name("keyed sum").print()
    client = mini_cluster.submit(env.get_job_graph("retention"))
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    # which checkpoints completed, from the JobMaster's statistics (not from the store under test)
    stats = json.loads(mini_cluster.dispatcher_gateway().call_sync(
        "request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id), timeout=10).statistics_json)
    completed = sorted(e["id"] for e in stats["history"] if e["status"] == "COMPLETED" and not e["is_savepoint"])
    assert stats["counts"]["completed"] > 2 and len(completed) >= 2, stats["counts"]
    retained = completed[-2:]  # the newest two
    assert retained[-1] == stats["latest_completed"]["id"]
    table = DeltaTable(str(tmp_path / "checkpoints" / client.job_id))
    kept = sorted(set(table.to_pyarrow_table(columns=["checkpoint_id"]).column("checkpoint_id").to_pylist()))
    store = CheckpointStore(str(tmp_path / "checkpoints" / client.job_id), client.job_id)
    assert set(retained) <= set(store.completed_ids()), f"the newest completed checkpoints {retained} are not the retained ones {kept}"
    # the two newest, and every checkpoint they build on (incremental: their chains), nothing else
    needed: set[int | None] = set()
    for cid in retained:
        meta = store.get(cid)
        assert meta is not None, f"checkpoint {cid} is retained but not in the store"
        needed |= set(map(checkpoint_of_path, meta.shared_files))
    assert kept == sorted(set(retained) | needed), (kept, retained, needed)
    if backend == "hashmap":
        assert len(kept) == 2, kept
    else:
        assert needed, "the retained checkpoints build on earlier ones"
    # nothing but the retained checkpoints' files is left on disk
    on_disk = {p.name for p in (tmp_path / "checkpoints" / client.job_id).iterdir() if p.name.startswith("checkpoint_id=") and any(p.iterdir())}
    assert on_disk == {f"checkpoint_id={c}" for c in kept}


class FailOnceAt:
    """Per-record: raises at record `at` the first time only."""

    def __init__(self, at: int, marker: Path) -> None:
        self.at, self.marker = at, str(marker)

    def __call__(self, r: tuple[int, int]) -> tuple[int, int]:
        if r[1] == self.at and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise ValueError(f"injected failure at record {self.at}")
        return r


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb", "rocksdb-incremental"])
def test_keyed_state_is_restored_after_a_failure_with_either_backend(mini_cluster: MiniCluster, tmp_path: Path, backend: str) -> None:
    from deltalake import DeltaTable

    from runtime.storage.checkpoint_store import CheckpointStore

    n, keys = 20_000, 50
    conf = Configuration()
    conf.set_string("state.backend.type", backend.split("-")[0])
    if backend == "rocksdb-incremental":
        # a changelog materialized only by each attempt's first checkpoint: every later checkpoint, the one
        # the restore reads included, is a chain (base + logs). With a short interval the newest checkpoint
        # was now and then a fresh base with no chain (materialization with retention: the test above)
        conf.set_string("state.backend.incremental", "true")
        conf.set_string("state.changelog.periodic-materialize.interval", "10 min")
    env = env_with_checkpoints(tmp_path, 2, conf=conf)
    source = DataGeneratorSource(lambda i: (i % keys, i), n, rate_limiter_strategy=RateLimiterStrategy.per_second(8_000))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "pairs")
        .map(FailOnceAt(n // 2, tmp_path / "failed-once"))
        .key_by(lambda r: r[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .name("running sum")
        .map(lambda r: {"key": r[0], "sum": r[1]})
        .sink_to(DeltaSink(str(tmp_path / "out")))
    )
    client = mini_cluster.submit(env.get_job_graph("keyed-restore"))
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED and result.accumulators["restarts"] >= 1
    if backend == "rocksdb-incremental":  # the latest checkpoint builds on earlier ones, which are kept
        latest = CheckpointStore(str(tmp_path / "checkpoints" / client.job_id), client.job_id).latest()
        assert latest is not None and latest.shared_files, latest
    table = DeltaTable(str(tmp_path / "out")).to_pyarrow_table()
    per_key: dict[int, list[int]] = {}
    for k, s in zip(table.column("key").to_pylist(), table.column("sum").to_pylist()):
        per_key.setdefault(k, []).append(s)
    # exactly once: one update row per record, and the last running sum is the true total
    assert {k: len(v) for k, v in per_key.items()} == {k: n // keys for k in range(keys)}
    assert {k: max(v) for k, v in per_key.items()} == {k: sum(range(k, n, keys)) for k in range(keys)}
