"""Two jobs writing one Delta table (issue 24, output safety): the job that comes second fails at
start with a message naming the table and the job that holds it, on a session cluster and with two
`millrace run` processes (two JobManagers); the table then holds exactly the first job's result.
Sinks that allow concurrent writers (appends only) share the table, and each job's rows are there
exactly once."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.cluster.conftest import ROOT, SessionCluster
from tests.integration.cluster.test_savepoint_cli import MAIN_JOB, read_table
from tests.integration.cluster.test_session_cluster import _job_id, _state
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TAGGED_IDS = str(Path(__file__).parent / "programs" / "tagged_ids.py")
EVENTS, RATE = 30_000, 5_000  # six seconds each, with checkpoints every 300 ms: jobs started together overlap


def _start(cluster: SessionCluster, *args: str, detached: bool = True) -> subprocess.Popen:
    env = dict(os.environ, MILLRACE_HOME=str(cluster.home))
    env.pop("MILLRACE_TOKEN", None)
    run = ["run", "--detached", "--cluster", "session"] if detached else ["run", "--provider", "local"]
    return subprocess.Popen([sys.executable, "-m", "runtime.cli", *run, *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _windowed_sum(out: Path) -> tuple[str, ...]:
    return (MAIN_JOB, "-p", "1", "--events", str(EVENTS), "--rate", str(RATE), "--checkpoint-interval-ms", "300", "--output", str(out))


def _finished(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=300)
        out.append((p.returncode, stdout))
    return out


def _root_cause(cluster: SessionCluster, job_id: str) -> str:
    return cluster.client().job_exceptions(job_id).root_exception or ""


def test_two_jobs_writing_one_table_on_a_session_cluster(session_cluster: SessionCluster, tmp_path: Path) -> None:
    from pipelines.jobs.windowed_sum import reference

    out = tmp_path / "T"
    submitted = _finished([_start(session_cluster, *_windowed_sum(out)) for _ in range(2)])  # started together
    assert all(rc == 0 for rc, _ in submitted), submitted
    jobs = [_job_id(stdout) for _, stdout in submitted]
    wait_until(lambda: all(_state(session_cluster, j) in ("FINISHED", "FAILED", "CANCELED") for j in jobs), timeout=120, what="both jobs ended")
    states = {j: _state(session_cluster, j) for j in jobs}
    assert sorted(states.values()) == ["FAILED", "FINISHED"], states
    winner, loser = sorted(jobs, key=lambda j: states[j] == "FAILED")
    cause = _root_cause(session_cluster, loser)
    assert f"cannot write {out}: another running job writes it (job {winner}" in cause, cause
    assert "allow_concurrent_writers=True" in cause
    assert read_table(out) == reference(EVENTS)  # the first job's result, row for row, nothing of the second


def test_two_millrace_run_processes_writing_one_table(session_cluster: SessionCluster, tmp_path: Path) -> None:
    from pipelines.jobs.windowed_sum import reference

    out = tmp_path / "T"
    runs = _finished([_start(session_cluster, *_windowed_sum(out), detached=False) for _ in range(2)])  # two JobManagers
    assert sorted(rc for rc, _ in runs) == [0, 1], runs
    (_, won), (_, lost) = sorted(runs)
    winner = _job_id(won)
    assert re.search(
        rf"cannot write {re.escape(str(out))}: another running job writes it \(job {winner}, sink 'delta: windowed_sum', JobManager \S+ pid \d+", lost
    ), lost
    assert "Traceback" not in lost
    assert read_table(out) == reference(EVENTS)


def test_sinks_that_allow_concurrent_writers_append_side_by_side(session_cluster: SessionCluster, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    out = tmp_path / "T"
    args = ["--records", str(EVENTS), "--rate", str(RATE), "--output", str(out), "--concurrent"]
    submitted = _finished([_start(session_cluster, TAGGED_IDS, "-p", "1", "--tag", tag, *args) for tag in ("a", "b")])
    assert all(rc == 0 for rc, _ in submitted), submitted
    jobs = [_job_id(stdout) for _, stdout in submitted]
    wait_until(lambda: all(_state(session_cluster, j) in ("FINISHED", "FAILED", "CANCELED") for j in jobs), timeout=120, what="both jobs ended")
    assert [_state(session_cluster, j) for j in jobs] == ["FINISHED", "FINISHED"], [_root_cause(session_cluster, j) for j in jobs]
    rows = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    for tag in ("a", "b"):
        got = sorted(r["id"] for r in rows if r["tag"] == tag)
        assert got == list(range(EVENTS)), f"job {tag}: {len(got)} rows, {len(set(got))} distinct"
    assert len(rows) == 2 * EVENTS
    # they did write at the same time: their checkpoint commits (app transaction ids) interleave
    apps = [app for app in _committing_apps(out) if app]
    switches = sum(1 for a, b in zip(apps, apps[1:]) if a != b)
    assert len(set(apps)) == 2 and switches >= 2, apps


def _committing_apps(table: Path) -> list[str | None]:
    """The app transaction id of each commit in the table's log, in order."""
    import json

    out = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        txns = [json.loads(line)["txn"]["appId"] for line in f.read_text().splitlines() if '"txn"' in line]
        out.append(txns[0] if txns else None)
    return out
