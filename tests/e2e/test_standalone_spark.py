"""Scale-out on a real standalone Spark cluster (a master and two 1-core workers on 127.0.0.1).

The cluster comes from infra/spark_standalone.sh; it is stopped after the module even when a test
fails, and no Master/Worker/executor JVM may outlive it. The main job runs with parallelism 2, so
its two TaskManagers are long-running Spark tasks that need both task slots: one on each worker's
executor. Measured on the 2-core machine (docs/deploy.md): standalone up in 15-46 s, the session
cluster (Spark driver, Delta jars from the Ivy cache, two executors, two TaskManagers) in 45-78 s;
the module takes 4-5 min.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.jobs import windowed_sum
from runtime.deploy.spark_executor import (
    DRIVER_EXECUTOR_ID,
    UNKNOWN_EXECUTOR_ID,
    SparkExecutorLocation,
    current_spark_executor,
    parse_executor_description,
)
from tests.e2e.standalone_spark import ROOT, StandaloneSpark, standalone_spark_cluster
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EVENTS = 200_000
MAIN_JOB = "pipelines/jobs/windowed_sum.py"


def _millrace(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, MILLRACE_HOME=str(home))
    env.pop("MILLRACE_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "runtime.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True,
        timeout=timeout, stdin=subprocess.DEVNULL,
    )


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _delta_rows(path: Path) -> dict[tuple[int, int], tuple[int, int]]:
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table()
    cols = [table.column(n).to_pylist() for n in windowed_sum.OUTPUT_COLUMNS]
    out = {(u, w): (c, s) for u, w, c, s in zip(*cols)}
    assert len(out) == table.num_rows, "duplicate (user_id, window_start) rows"
    return out


def _task_managers(url: str, token: str) -> list[dict[str, Any]]:
    """GET /taskmanagers: the TaskManager entries, whatever envelope the REST API wraps them in."""
    req = urllib.request.Request(f"{url.rstrip('/')}/taskmanagers", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:  # loopback only: the cluster binds 127.0.0.1
        body = json.load(resp)
    if isinstance(body, dict):
        body = next((v for v in body.values() if isinstance(v, list)), [])
    return list(body)


def _field(entry: dict[str, Any], *names: str) -> Any:
    """A value by any of the spellings a REST model may use (snake_case, Flink's kebab-case, camelCase)."""
    for name in names:
        for key in (name, name.replace("_", "-"), re.sub(r"_(\w)", lambda m: m.group(1).upper(), name)):
            if key in entry:
                return entry[key]
    return None


def _executor_of(entry: dict[str, Any]) -> SparkExecutorLocation:
    text = _field(entry, "spark_executor_id", "spark_executor")
    loc = parse_executor_description(text)
    assert loc is not None, f"TaskManager entry without a Spark executor: {entry}"
    return loc


def _assert_on_two_executors_of(standalone: StandaloneSpark, locations: list[SparkExecutorLocation], tm_pids: list[int]) -> None:
    ids = [loc.executor_id for loc in locations]
    assert len(set(ids)) == 2 and not {DRIVER_EXECUTOR_ID, UNKNOWN_EXECUTOR_ID} & set(ids), ids
    assert all(loc.host == "127.0.0.1" for loc in locations), locations
    # and the processes agree: each TaskManager descends from an executor JVM of this cluster
    cluster_pids = {pid for pid, _ in standalone.spark_processes()}
    jvms = set()
    for pid, reported in zip(tm_pids, locations):
        found = current_spark_executor(pid)
        assert found.executor_id == reported.executor_id, (pid, found, reported)
        assert found.jvm_pid in cluster_pids, f"TaskManager {pid} runs under JVM {found.jvm_pid}, not one of the standalone cluster's"
        jvms.add(found.jvm_pid)
    assert len(jvms) == 2


def _executor_processes(standalone: StandaloneSpark) -> list[tuple[int, str]]:
    """Executor JVMs of the cluster and the pyspark daemons/workers under them (not the master or workers)."""
    markers = ("org.apache.spark.executor.CoarseGrainedExecutorBackend", "pyspark.daemon", "pyspark.worker")
    return [(pid, cmd) for pid, cmd in standalone.spark_processes() if any(m in cmd for m in markers)]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    with standalone_spark_cluster(tmp_path_factory.mktemp("spark-standalone"), workers=2, cores_per_worker=1) as cluster:
        print(f"standalone Spark up in {cluster.start_seconds:.1f}s at {cluster.master_url}")
        yield cluster


def test_session_cluster_on_standalone_spark_runs_the_main_job_on_two_executors(standalone: StandaloneSpark, tmp_path: Path) -> None:
    status = standalone.status()
    assert status.returncode == 0 and "2 workers ALIVE" in status.stdout, status.stdout + status.stderr
    home = tmp_path / "millrace-home"
    out_table = tmp_path / "windowed_sum"
    started = time.monotonic()
    start = _millrace(
        home, "cluster", "start", "--spark-master", standalone.master_url, "--taskmanagers", "2", "--max-taskmanagers", "2",
        "--slots-per-taskmanager", "1", "--rest-port", "0", timeout=400,
    )
    cluster_json = home / "cluster.json"
    info = json.loads(cluster_json.read_text()) if cluster_json.exists() else None
    tm_pids: list[int] = []
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        assert info is not None and info["url"].startswith("http://127.0.0.1:")
        tms = wait_until(lambda: (lambda t: t if len(t) == 2 else None)(_task_managers(info["url"], info["token"])), 300, "2 TaskManagers")
        print(f"session cluster with 2 TaskManagers up in {time.monotonic() - started:.1f}s")
        tm_ids = sorted(_field(t, "tm_id", "id") for t in tms)
        tm_pids = [_field(t, "pid") for t in tms]
        _assert_on_two_executors_of(standalone, [_executor_of(t) for t in tms], tm_pids)
        executor_jvms = [pid for pid, cmd in _executor_processes(standalone) if "CoarseGrainedExecutorBackend" in cmd]
        assert len(executor_jvms) == 2, _executor_processes(standalone)

        job_started = time.monotonic()
        run = _millrace(home, "run", MAIN_JOB, "--cluster", "session", "-p", "2", "--events", str(EVENTS), "--output", str(out_table), timeout=400)
        assert run.returncode == 0, run.stdout + run.stderr
        print(f"main job ({EVENTS:,} events) on the session cluster in {time.monotonic() - job_started:.1f}s")
        assert "-> FINISHED" in run.stdout
        job_id = re.search(r"JobID ([0-9a-f]{32})", run.stdout).group(1)
        listed = _millrace(home, "list")
        assert listed.returncode == 0 and re.search(rf"{job_id}\s+FINISHED", listed.stdout), listed.stdout + listed.stderr
        details = _millrace(home, "info", job_id)
        assert details.returncode == 0, details.stderr
        # the job's subtasks ran on both TaskManagers (one slot each), so on both executors
        assert sorted(set(re.findall(r"subtask \d+: FINISHED attempt \d+ on (\S+)", details.stdout))) == tm_ids, details.stdout
        assert _delta_rows(out_table) == windowed_sum.reference(EVENTS)
    finally:
        stop = _millrace(home, "cluster", "stop", timeout=180)
        if info is not None and _alive(info["pid"]):
            os.killpg(info["pid"], 9)  # do not leak a JobManager (and its Spark driver) when stop failed
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert not _alive(info["pid"])
    # the driver is gone, so the master removes the application and the workers kill its executors;
    # their pyspark daemons and the TaskManagers in them follow
    wait_until(lambda: not any(_alive(p) for p in tm_pids), 60, f"TaskManager processes {tm_pids} to exit")
    wait_until(lambda: not _executor_processes(standalone), 60, "the session cluster's executors and their Python workers to exit")
    assert standalone.status().returncode == 0, "the standalone cluster itself must outlive the session cluster"
