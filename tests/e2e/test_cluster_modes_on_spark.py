"""Session and application clusters whose TaskManagers run on Spark executors (local Spark)."""
from __future__ import annotations

import re
import time
from pathlib import Path

from pipelines.jobs import windowed_sum
from tests.e2e.test_main_job_on_spark import _read_delta
from tests.integration.cluster.conftest import millrace, pid_alive, stop_session_cluster

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "pipelines" / "jobs" / "windowed_sum.py")


def test_session_cluster_on_spark_runs_the_main_job(spark, tmp_path: Path) -> None:
    home = tmp_path / "home"
    out = millrace(home, "cluster", "start", "--taskmanagers", "2", "--max-taskmanagers", "3", timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    from tests.integration.cluster.conftest import SessionCluster

    cluster = SessionCluster(home)
    try:
        deadline = time.monotonic() + 120  # the session's TaskManagers register while Spark starts their tasks
        while len(tms := [t.model_dump(by_alias=True, mode="json") for t in cluster.client().task_managers()]) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        run = cluster.cli("run", JOB, "--cluster", "session", "-p", "2", "--events", "100000", "--output", str(tmp_path / "ws"), timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        assert "-> FINISHED" in run.stdout
    finally:
        stop = stop_session_cluster(cluster)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not pid_alive(cluster.pid)
    assert _read_delta(spark, str(tmp_path / "ws")) == windowed_sum.reference(100_000)
    # the session's TaskManagers are Spark tasks (not processes of the CLI or the JobManager)
    assert len(tms) >= 2 and all(t["sparkExecutorId"] for t in tms), tms
    assert all(t["pid"] != cluster.pid for t in tms)


def test_application_cluster_on_spark_runs_main_in_the_jobmanager(spark, tmp_path: Path) -> None:
    run = millrace(tmp_path / "home", "run", JOB, "--mode", "application", "-p", "2", "--events", "50000", "--output", str(tmp_path / "ws"), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Application FINISHED" in run.stdout
    pid = int(re.search(r"\(pid (\d+)", run.stdout).group(1))
    assert not pid_alive(pid)
    assert _read_delta(spark, str(tmp_path / "ws")) == windowed_sum.reference(50_000)
