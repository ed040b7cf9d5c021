"""The main job with TaskManagers on Spark executors; output read back through delta-spark."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pipelines.jobs import windowed_sum
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig

ROOT = Path(__file__).resolve().parents[2]


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode()


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _read_delta(spark, path: str) -> dict[tuple[int, int], tuple[int, int]]:
    df = spark.read.format("delta").load(path)
    assert df.columns == ["user_id", "window_start", "count", "sum"]
    rows = df.collect()
    out = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows}
    assert len(out) == len(rows), "duplicate (user_id, window_start) rows"
    return out


def test_main_job_runs_on_spark_executors_and_delta_output_equals_reference(spark, tmp_path: Path) -> None:
    events = 300_000
    out = str(tmp_path / "windowed_sum")
    with MiniCluster(MiniClusterConfig(provider="spark", tm_log_level="WARNING"), spark=spark) as cluster:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        windowed_sum.build(env, events, out)
        client = cluster.submit(env.get_job_graph("windowed_sum"))
        result = client.get_job_execution_result(timeout=300)
        assert result.status is JobStatus.FINISHED
        tms = cluster.task_managers()
        assert len(tms) == 2
        for tm in tms:
            # a Spark Python worker process: not the driver, forked by Spark's pyspark daemon
            assert tm.pid != os.getpid()
            assert tm.spark_executor_id is not None and "task" in tm.spark_executor_id
            chain = [_cmdline(tm.pid), _cmdline(_ppid(tm.pid))]
            assert any("pyspark" in c for c in chain), chain
        assert result.accumulators["delta_records"] > 0
    assert _read_delta(spark, out) == windowed_sum.reference(events)
    # no Spark job of a TaskManager is left running
    assert spark.sparkContext.statusTracker().getActiveJobsIds() == []


def test_per_record_path_on_spark_matches_reference(spark, tmp_path: Path) -> None:
    events = 20_000
    out = str(tmp_path / "per_record")
    with MiniCluster(MiniClusterConfig(provider="spark", tm_log_level="WARNING"), spark=spark) as cluster:
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_parallelism(2)
        windowed_sum.build(env, events, out, per_record=True)
        result = cluster.submit(env.get_job_graph("windowed_sum")).get_job_execution_result(timeout=300)
        assert result.status is JobStatus.FINISHED
    assert _read_delta(spark, out) == windowed_sum.reference(events)


def test_cli_runs_the_main_job_and_reports(tmp_path: Path) -> None:
    """`millrace run` as the README uses it (local-process TaskManagers to keep this test quick)."""
    out = tmp_path / "cli_out"
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", "pipelines/jobs/windowed_sum.py", "--provider", "local",
         "--parallelism", "2", "--events", "50000", "--output", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout
    assert "2 slots needed" in text and "HASH" in text  # plan summary with chains and slots
    assert "Job has been submitted with JobID" in text
    assert "-> CREATED" in text and "-> RUNNING" in text and "-> FINISHED" in text
    assert "records/s" in text
    assert f"Delta table {out}" in text
    # running it again replaces the table's contents in a new version: no doubled rows
    again = subprocess.run(proc.args, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(version 1," in again.stdout
    from deltalake import DeltaTable

    table = DeltaTable(str(out)).to_pyarrow_table()
    got = {(u, w): (c, s) for u, w, c, s in zip(*(table.column(n).to_pylist() for n in ("user_id", "window_start", "count", "sum")))}
    assert table.num_rows == len(got) and got == windowed_sum.reference(50000)


def test_cli_failed_job_shows_user_exception_and_exits_nonzero(tmp_path: Path) -> None:
    job = tmp_path / "bad_job.py"
    job.write_text(
        "from runtime.api.datastream import StreamExecutionEnvironment\n"
        "def boom(x):\n"
        "    if x == 3:\n"
        "        raise KeyError('missing user 3')\n"
        "    return x\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        "env.from_collection([1, 2, 3, 4]).map(boom).name('lookup user').print()\n"
        "env.execute('bad')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", str(job), "--provider", "local"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode != 0
    err = proc.stderr
    assert "KeyError" in err and "missing user 3" in err
    assert "lookup user" in err and "(1/1)" in err
    assert "def boom" not in err or "line" in err  # the task's traceback is shown
    assert "in boom" in err


def _cli_plan(job: Path, pipeline: str, job_name: str) -> subprocess.CompletedProcess:
    """Write a one-line program (`env.<pipeline>`) to `job` and run `millrace plan` on it."""
    job.write_text(
        "from runtime.api.datastream import StreamExecutionEnvironment\n"
        "env = StreamExecutionEnvironment.get_execution_environment()\n"
        f"env.{pipeline}\n"
        f"env.execute('{job_name}')\n"
    )
    return subprocess.run([sys.executable, "-m", "runtime.cli", "plan", str(job)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_cli_rejects_invalid_program_at_compile_time_naming_the_operator(tmp_path: Path) -> None:
    job = tmp_path / "no_sink.py"
    proc = _cli_plan(job, "from_collection([1, 2]).map(lambda x: x)", "no-sink")
    assert proc.returncode == 2
    assert "has no sink" in proc.stderr and "Map" in proc.stderr and "Traceback" not in proc.stderr
    proc = _cli_plan(job, "from_collection([1, 2]).map(5).print()", "bad-fn")
    assert proc.returncode == 2
    assert "map()" in proc.stderr and "int" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_plan_prints_the_job_graph() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "plan", "pipelines/jobs/windowed_sum.py", "-p", "3", "--output", "/nonexistent"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Job 'windowed_sum' (STREAMING), 3 slots needed" in proc.stdout
    assert "events -> double value -> Timestamps/Watermarks   parallelism 3" in proc.stdout
    assert "<- [1] HASH" in proc.stdout
