"""Batch mode with TaskManagers on Spark executors: blocking exchanges through Delta, failover without producers."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from pipelines.jobs import windowed_sum
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from tests.integration.runtime.test_batch import batch_env, two_input_job, two_input_reference

ROOT = Path(__file__).resolve().parents[2]


def _benchmark(name: str):
    spec = importlib.util.spec_from_file_location(f"millrace_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_windowed_sum_and_a_two_input_job_in_batch_on_spark_equal_their_references(spark, tmp_path: Path) -> None:
    events = 200_000
    out = str(tmp_path / "windowed_sum")
    with MiniCluster(MiniClusterConfig(provider="spark", tm_log_level="WARNING"), spark=spark) as cluster:
        env = batch_env(tmp_path, 2)
        windowed_sum.build(env, events, out)
        result = cluster.submit(env.get_job_graph("windowed_sum")).get_job_execution_result(timeout=300)
        assert result.status is JobStatus.FINISHED
        env = batch_env(tmp_path, 2)
        two_input_job(env, 20_000, str(tmp_path / "two"))
        result = cluster.submit(env.get_job_graph("two inputs")).get_job_execution_result(timeout=300)
        assert result.status is JobStatus.FINISHED
    rows = spark.read.format("delta").load(out).collect()
    got = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows}
    assert len(got) == len(rows) and got == windowed_sum.reference(events)
    two = sorted((r["k"], r["left"], r["right"]) for r in spark.read.format("delta").load(str(tmp_path / "two")).collect())
    assert two == two_input_reference(20_000)


def test_a_killed_consumer_task_manager_restarts_only_the_consumer(spark, tmp_path: Path) -> None:
    bench = _benchmark("batch_failover")
    out = bench.run(bench.parse_args(["--events", "1000000", "--provider", "spark", "--output", str(tmp_path / "out")]), spark=spark)
    assert out["status"] == "FINISHED", out
    assert out["producer_attempts"] == out["producer_subtasks"] == 2, out  # producers never ran again
    assert out["consumer_attempts"] > out["consumer_subtasks"], out
    assert out["killed_every_producers_task_manager"], out  # the producers' output was read from Delta afterwards
    assert out["duplicate_keys"] == out["missing_keys"] == out["wrong_values"] == 0, out
    assert out["rows"] == len(windowed_sum.reference(1_000_000))
    assert not out["blocking_results_left"]
