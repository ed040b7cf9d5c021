"""Per-job and application clusters: dedicated JobManager processes that live as long as their work."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path

from tests.integration.cluster.conftest import PROGRAM, millrace, pid_alive
from tests.integration.cluster.programs.squares import reference
from tests.integration.cluster.test_session_cluster import _final_totals, _job_id


def _cluster_pid(stdout: str) -> int:
    found = re.search(r"cluster at http://127\.0\.0\.1:\d+ \(pid (\d+)", stdout)
    assert found, stdout
    return int(found.group(1))


def _leftover_cluster_files(home: Path) -> list[Path]:
    return list(home.rglob("cluster.json"))


def test_per_job_cluster_runs_the_job_and_goes_away(tmp_path):
    out = millrace(tmp_path, "run", str(PROGRAM), "--mode", "per-job", "--provider", "local", "-p", "2", "--records", "100", "--output", str(tmp_path / "t"))
    assert out.returncode == 0, out.stdout + out.stderr
    pid = _cluster_pid(out.stdout)
    assert pid != os.getpid() and "-> FINISHED" in out.stdout
    assert _final_totals(tmp_path / "t") == reference(100)
    assert not pid_alive(pid), "the per-job JobManager must end with its job"
    assert _leftover_cluster_files(tmp_path) == []


def test_per_job_failure_is_reported_and_the_cluster_still_goes(tmp_path):
    out = millrace(
        tmp_path, "run", str(PROGRAM), "--mode", "per-job", "--provider", "local", "--records", "20", "--fail-at", "3", "--output", str(tmp_path / "t")
    )
    assert out.returncode == 1 and "record 3 is poisoned" in out.stderr, out.stdout + out.stderr
    assert not pid_alive(_cluster_pid(out.stdout))


def test_detached_per_job_cluster_stops_itself_after_the_job(tmp_path):
    out = millrace(tmp_path, "run", str(PROGRAM), "--mode", "per-job", "-d", "--provider", "local", "--records", "30", "--output", str(tmp_path / "t"))
    assert out.returncode == 0, out.stdout + out.stderr
    pid, job_id = _cluster_pid(out.stdout), _job_id(out.stdout)
    assert pid_alive(pid)
    deadline = time.monotonic() + 90
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not pid_alive(pid), "a detached per-job cluster stops once its job ended"
    assert _final_totals(tmp_path / "t") == reference(30)
    assert job_id


def test_application_main_runs_inside_the_jobmanager(tmp_path):
    pid_file = tmp_path / "main.pid"
    out = millrace(
        tmp_path, "run", str(PROGRAM), "--mode", "application", "--provider", "local", "-p", "2", "--records", "80", "--output", str(tmp_path / "t"),
        "--pid-file", str(pid_file),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    cluster_pid = _cluster_pid(out.stdout)
    main_pid = int(pid_file.read_text())
    assert main_pid == cluster_pid, "main() must run in the application cluster's JobManager process, not on the client"
    assert "Application FINISHED" in out.stdout and "-> FINISHED" in out.stdout
    assert _final_totals(tmp_path / "t") == reference(80)
    assert not pid_alive(cluster_pid) and _leftover_cluster_files(tmp_path) == []


def test_failing_application_exits_non_zero_with_the_cause(tmp_path):
    out = millrace(
        tmp_path, "run", str(PROGRAM), "--mode", "application", "--provider", "local", "--records", "20", "--fail-at", "5", "--output", str(tmp_path / "t")
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Application FAILED" in out.stderr and "record 5 is poisoned" in out.stderr
    assert not pid_alive(_cluster_pid(out.stdout))
