"""Batch execution: blocking exchanges through Delta, regions scheduled lazily from the sources."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import Configuration, Types, WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.functions import KeyedCoProcessFunction
from runtime.api.datastream.state import ValueStateDescriptor
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m

pytestmark = pytest.mark.integration


def batch_env(tmp_path: Path, parallelism: int, **conf: str) -> StreamExecutionEnvironment:
    c = Configuration()
    c.set_string("execution.runtime-mode", "BATCH")
    c.set_string("execution.batch.blocking-results.dir", str(tmp_path / "blocking"))
    for k, v in conf.items():
        c.set_string(k, v)
    env = StreamExecutionEnvironment.get_execution_environment(c)
    env.set_parallelism(parallelism)
    return env


def read_windowed_sum(path: str) -> dict[tuple[int, int], tuple[int, int]]:
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    got = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows}
    assert len(got) == len(rows), "duplicate (user, window) rows"
    return got


def run_windowed_sum(cluster: MiniCluster, env: StreamExecutionEnvironment, n: int, out: str) -> m.JobDetailsMessage:
    """windowed_sum on `env` and `cluster`: FINISHED, its table equal to the reference; the job's details."""
    from pipelines.jobs import windowed_sum

    windowed_sum.build(env, n, out)
    client = cluster.submit(env.get_job_graph("windowed_sum"))
    result = client.get_job_execution_result(timeout=180)
    assert result.status is JobStatus.FINISHED
    assert read_windowed_sum(out) == windowed_sum.reference(n)
    return cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=client.job_id), timeout=10)


def vertex_times(cluster: MiniCluster, job_id: str) -> list[tuple[int, int]]:
    """Per vertex (topological order): (first subtask deployed, last subtask finished), in ms."""
    details: m.JobDetailsMessage = cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=10)
    return [
        (min(s.state_timestamps_ms["DEPLOYING"] for s in v.subtasks), max(s.state_timestamps_ms["FINISHED"] for s in v.subtasks))
        for v in details.vertices
    ]


@pytest.mark.parametrize("per_record", [False, True], ids=["columnar", "per-record"])
def test_windowed_sum_in_batch_equals_the_reference_and_runs_stage_by_stage(mini_cluster: MiniCluster, tmp_path: Path, per_record: bool) -> None:
    from pipelines.jobs import windowed_sum

    n, out = 40_000, str(tmp_path / "out")
    env = batch_env(tmp_path, 2)
    windowed_sum.build(env, n, out, per_record=per_record)
    client = mini_cluster.submit(env.get_job_graph("windowed_sum"))
    result = client.get_job_execution_result(timeout=180)
    assert result.status is JobStatus.FINISHED
    assert read_windowed_sum(out) == windowed_sum.reference(n)
    # lazily from the sources: the window stage started after the source stage ended
    source, window = vertex_times(mini_cluster, client.job_id)
    assert window[0] >= source[1], (source, window)
    # REST's regions: 2 source regions, then one per window subtask, each reading every key group
    # partition of both sources (adaptive batch gave the window stage 1 subtask for this small input)
    details = mini_cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=client.job_id), timeout=10)
    from runtime.rest.models import job_details

    assert [v.parallelism for v in details.vertices] == [2, 1]
    regions = job_details(details, 0).model_dump(by_alias=True)["regions"]
    assert [(r["status"], r["blocking-inputs"], r["blocking-inputs-committed"]) for r in regions] == [
        ("FINISHED", 0, 0), ("FINISHED", 0, 0), ("FINISHED", 2, 2)
    ]
    # a job's blocking results go with it
    assert not os.path.exists(tmp_path / "blocking" / client.job_id)


def test_stages_at_parallelism_4_complete_on_2_slots(tmp_path: Path) -> None:
    cluster = MiniCluster(MiniClusterConfig(provider="local", slots_per_task_manager=2, max_task_managers=1, tm_log_level="WARNING")).start()
    try:
        # a small data volume per task: adaptive batch gives the window stage parallelism 4 too
        env = batch_env(tmp_path, 4, **{"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 kb"})
        details = run_windowed_sum(cluster, env, 30_000, str(tmp_path / "out"))
        assert [v.parallelism for v in details.vertices] == [4, 4]
        assert len(cluster.task_managers()) == 1
    finally:
        cluster.close()


class SumBothSides(KeyedCoProcessFunction):
    """Per key: the sum of each input, emitted once when input ends (an event-time timer at the end)."""

    def open(self, ctx: Any) -> None:
        self.left = ctx.get_state(ValueStateDescriptor("left", Types.LONG()))
        self.right = ctx.get_state(ValueStateDescriptor("right", Types.LONG()))

    def _add(self, state: Any, v: int, ctx: Any) -> None:
        state.update((state.value() or 0) + v)
        ctx.timer_service().register_event_time_timer(10**12)

    def process_element1(self, value: tuple[int, int], ctx: Any):
        self._add(self.left, value[1], ctx)
        return []

    def process_element2(self, value: tuple[int, int], ctx: Any):
        self._add(self.right, value[1], ctx)
        return []

    def on_timer(self, timestamp: int, ctx: Any):
        yield {"k": ctx.get_current_key(), "left": self.left.value() or 0, "right": self.right.value() or 0}


def two_input_job(env: StreamExecutionEnvironment, n: int, out: str) -> None:
    """Two sources keyed by k % 97, connected into a KeyedCoProcessFunction (blocking exchanges in batch)."""
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: e[0])
    left = env.from_source(DataGeneratorSource(lambda i: (i, i % 3), n), wm, "left")
    right = env.from_source(DataGeneratorSource(lambda i: (i, (i * 7) % 5), n // 2), wm, "right")
    out_type = Types.ROW_NAMED(["k", "left", "right"], [Types.LONG(), Types.LONG(), Types.LONG()])
    (
        left.key_by(lambda e: e[0] % 97)
        .connect(right.key_by(lambda e: e[0] % 97))
        .process(SumBothSides(), output_type=out_type)
        .sink_to(DeltaSink.for_path(out))
    )


def two_input_reference(n: int) -> list[tuple[int, int, int]]:
    expected: dict[int, list[int]] = {}
    for i in range(n):
        expected.setdefault(i % 97, [0, 0])[0] += i % 3
    for i in range(n // 2):
        expected.setdefault(i % 97, [0, 0])[1] += (i * 7) % 5
    return sorted((k, a, b) for k, (a, b) in expected.items())


def test_a_two_input_operator_after_blocking_exchanges(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n, out = 20_000, str(tmp_path / "out")
    env = batch_env(tmp_path, 2)
    two_input_job(env, n, out)
    result = mini_cluster.submit(env.get_job_graph("two inputs")).get_job_execution_result(timeout=180)
    assert result.status is JobStatus.FINISHED
    from deltalake import DeltaTable

    rows = DeltaTable(out).to_pyarrow_table().to_pylist()
    assert sorted((r["k"], r["left"], r["right"]) for r in rows) == two_input_reference(n)


def test_a_killed_consumer_task_manager_restarts_only_the_consumer(tmp_path: Path) -> None:
    """The failover benchmark, small, on local processes (tests/e2e runs it on Spark)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("millrace_batch_failover", Path(__file__).resolve().parents[3] / "benchmarks" / "batch_failover.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.run(bench.parse_args(["--events", "400000", "--provider", "local", "--output", str(tmp_path / "out")]))
    assert out["status"] == "FINISHED", out
    assert out["producer_attempts"] == out["producer_subtasks"] == 2, out
    assert out["consumer_attempts"] > out["consumer_subtasks"], out
    assert out["killed_every_producers_task_manager"], out  # the producers' output was read from Delta afterwards
    assert out["duplicate_keys"] == out["missing_keys"] == out["wrong_values"] == 0, out
    assert not out["blocking_results_left"]


def keyed_sum_job(env: StreamExecutionEnvironment, n: int, out: str, parallelism: int | None = None) -> list[tuple[int, int]]:
    """(i % 13, i) for i < n, key_by the first field, sum the second, into Delta (k, v); returns the input rows.
    `parallelism`: set on every operator after the source (else the default)."""
    rows = [(i % 13, i) for i in range(n)]
    row_type = Types.ROW_NAMED(["k", "v"], [Types.LONG(), Types.LONG()])

    def at(x: Any) -> Any:
        return x.set_parallelism(parallelism) if parallelism else x

    summed = at(env.from_collection(rows, type_info=Types.TUPLE([Types.LONG(), Types.LONG()])).key_by(lambda r: r[0]).sum(1))
    at(at(summed.map(lambda r: {"k": r[0], "v": r[1]}, output_type=row_type)).sink_to(DeltaSink.for_path(out)))
    return rows


def test_keyed_sum_in_batch_emits_each_keys_final_value_once(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    """Flink's BatchGroupedReduceOperator: the streaming run's last value per key, and nothing before it."""
    n, out = 5_000, str(tmp_path / "out")
    env = batch_env(tmp_path, 2)
    rows = keyed_sum_job(env, n, out)
    result = mini_cluster.submit(env.get_job_graph("batch sum")).get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    from deltalake import DeltaTable

    got = sorted((r["k"], r["v"]) for r in DeltaTable(out).to_pyarrow_table().to_pylist())
    expected: dict[int, int] = {}
    for k, v in rows:
        expected[k] = expected.get(k, 0) + v
    assert got == sorted(expected.items())


def test_millrace_run_runtime_mode_batch(tmp_path: Path) -> None:
    """`millrace run --runtime-mode batch` (embedded, local processes): the plan says BATCH, the table is the reference."""
    import subprocess
    import sys

    from pipelines.jobs import windowed_sum

    root = Path(__file__).resolve().parents[3]
    env = dict(os.environ, MILLRACE_HOME=str(tmp_path / "home"), MILLRACE_WAREHOUSE=str(tmp_path / "warehouse"))
    out = str(tmp_path / "out")
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", "--runtime-mode", "batch", "--provider", "local", "-p", "2",
         "pipelines/jobs/windowed_sum.py", "--events", "20000", "--output", out],
        cwd=root, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(BATCH)" in proc.stdout and "HASH (blocking)" in proc.stdout, proc.stdout
    assert read_windowed_sum(out) == windowed_sum.reference(20_000)
    assert not any((tmp_path / "warehouse" / "_blocking").glob("*/*")), "blocking results left behind"


def test_a_failed_commit_of_blocking_results_reruns_only_that_producer(mini_cluster: MiniCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JobMaster runs in this process: its first commit of producer subtask 0's files fails."""
    import runtime.storage.blocking_results as br
    from pipelines.jobs import windowed_sum

    real, failed = br.commit_partition, []

    def flaky(table_uri: str, producer_subtask: int, files: list, generation: int = 1) -> bool:
        if producer_subtask == 0 and not failed:
            failed.append(table_uri)
            raise br.StorageError(f"injected: commit to {table_uri} failed")
        return real(table_uri, producer_subtask, files, generation)

    monkeypatch.setattr(br, "commit_partition", flaky)
    n, out = 30_000, str(tmp_path / "out")
    env = batch_env(tmp_path, 2, **{"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "100 ms"})
    windowed_sum.build(env, n, out)
    client = mini_cluster.submit(env.get_job_graph("windowed_sum"))
    result = client.get_job_execution_result(timeout=180)
    assert result.status is JobStatus.FINISHED
    assert failed and read_windowed_sum(out) == windowed_sum.reference(n)
    details = mini_cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=client.job_id), timeout=10)
    producers, consumers = details.vertices
    assert [s.attempt_number for s in producers.subtasks] == [1, 0]  # only the producer whose commit failed ran again
    assert all(s.attempt_number == 0 for s in consumers.subtasks)  # its consumers had not started
    # the failed attempt's files were removed; the job's results went with it
    assert not (tmp_path / "blocking" / client.job_id).exists()


@pytest.mark.parametrize("events, volume_per_task, expected", [(40_000, None, 1), (1_200_000, None, 3), (40_000, "500 kb", 3), (40_000, "1 kb", 4)])
def test_adaptive_batch_sizes_the_window_stage_from_its_input_bytes(
    mini_cluster: MiniCluster, tmp_path: Path, events: int, volume_per_task: str | None, expected: int
) -> None:
    """40,000 events are ~1.4 MB of blocking results: 1 subtask at Flink's default 16 MB per task;
    1,200,000 events (~38 MB) get 3; less per task gives more, up to the default parallelism (4).
    The output is the same at any parallelism."""
    conf = {"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": volume_per_task} if volume_per_task else {}
    source, window = run_windowed_sum(mini_cluster, batch_env(tmp_path, 4, **conf), events, str(tmp_path / "out")).vertices
    assert (source.parallelism, window.parallelism) == (4, expected)
    assert [s.subtask_index for s in window.subtasks] == list(range(expected))


def test_a_parallelism_set_on_the_operator_is_kept(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n, out = 10_000, str(tmp_path / "out")
    env = batch_env(tmp_path, 2)
    keyed_sum_job(env, n, out, parallelism=3)
    client = mini_cluster.submit(env.get_job_graph("explicit"))
    assert client.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    details = mini_cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=client.job_id), timeout=10)
    assert [v.parallelism for v in details.vertices][-1] == 3

