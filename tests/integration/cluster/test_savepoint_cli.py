"""Savepoints through the CLI and REST on a session cluster: stop -> run -s with another parallelism,
savepoint + dispose, and the REST errors (4xx, never 5xx)."""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.integration.cluster.conftest import ROOT, SessionCluster
from tests.integration.cluster.test_session_cluster import _job_id, _state, _subtask_tms
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

MAIN_JOB = str(ROOT / "pipelines" / "jobs" / "windowed_sum.py")


def read_table(path: Path) -> dict[tuple[int, int], tuple[int, int]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for r in rows:
        key = (r["user_id"], r["window_start"])
        assert key not in out, f"duplicated row {key}"
        out[key] = (r["count"], r["sum"])
    return out


def _rows(path: Path) -> int:
    """Rows committed to the Delta table at `path` so far (0 while there is none)."""
    if not (path / "_delta_log").is_dir():
        return 0
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table(columns=["user_id"]).num_rows


def _location(stdout: str) -> str:
    found = re.search(r"Savepoint completed\. Path: (\S+)", stdout)
    assert found, stdout
    return found.group(1)


def stop_and_resume(
    cluster: SessionCluster, tmp_path: Path, new_parallelism: int, embedded_resume: bool = False, events: int = 120_000, rate: int = 15_000
) -> None:
    """The savepoint issue's acceptance 1: run detached at p=2, stop with a savepoint after a few
    seconds, run again from it at another parallelism; the table equals the failure-free result."""
    from pipelines.jobs.windowed_sum import reference

    out = tmp_path / "T"
    run = cluster.cli(
        "run", "--detached", "--cluster", "session", MAIN_JOB, "-p", "2",
        "--events", str(events), "--rate", str(rate), "--checkpoint-interval-ms", "1000", "--output", str(out),
    )
    assert run.returncode == 0, run.stdout + run.stderr
    job_id = _job_id(run.stdout)
    wait_until(lambda: _subtask_tms(cluster, job_id), what="subtasks running")
    # a checkpoint committed rows to the table: the job is under way (the stop comes in its middle)
    wait_until(lambda: _rows(out), what="a checkpoint's rows in the output table")
    stop = cluster.cli("stop", job_id, "--savepoint-path", str(tmp_path / "sp"))
    assert stop.returncode == 0, stop.stdout + stop.stderr
    path = _location(stop.stdout)
    assert path.startswith(str(tmp_path / "sp") + "/savepoint-")
    wait_until(lambda: _state(cluster, job_id) == "FINISHED", what="the stopped job FINISHED")
    assert 0 < len(read_table(out)) < len(reference(events))  # it stopped in the middle
    where = ["--provider", "local"] if embedded_resume else ["--cluster", "session"]
    resumed = cluster.cli("run", *where, "-s", path, MAIN_JOB, "-p", str(new_parallelism), "--events", str(events), "--output", str(out))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert read_table(out) == reference(events)


def test_stop_then_resume_at_3_on_the_session_cluster(session_cluster: SessionCluster, tmp_path: Path) -> None:
    stop_and_resume(session_cluster, tmp_path, 3)


def test_stop_then_resume_at_1_embedded(session_cluster: SessionCluster, tmp_path: Path) -> None:
    stop_and_resume(session_cluster, tmp_path, 1, embedded_resume=True)


def test_savepoint_and_dispose(session_cluster: SessionCluster, tmp_path: Path) -> None:
    run = session_cluster.cli(
        "run", "--detached", "--cluster", "session", MAIN_JOB, "-p", "1", "--events", "60000", "--rate", "10000", "--output", str(tmp_path / "T"),
    )
    job_id = _job_id(run.stdout)
    wait_until(lambda: _subtask_tms(session_cluster, job_id), what="subtasks running")
    sp = session_cluster.cli("savepoint", job_id, str(tmp_path / "sp"))
    assert sp.returncode == 0, sp.stdout + sp.stderr
    path = _location(sp.stdout)
    assert _state(session_cluster, job_id) == "RUNNING"
    assert Path(path, "_delta_log").is_dir()
    session_cluster.cli("cancel", job_id)
    gone = session_cluster.cli("savepoint", "--dispose", path)
    assert gone.returncode == 0 and "disposed" in gone.stdout, gone.stdout + gone.stderr
    assert not Path(path).exists()
    again = session_cluster.cli("savepoint", "--dispose", path)
    assert again.returncode == 2 and "holds no savepoint" in again.stderr, again.stderr


def _post(cluster: SessionCluster, path: str, body: bytes = b"{}") -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {cluster.token}", "Content-Type": "application/json"}
    req = urllib.request.Request(cluster.url + path, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _get(cluster: SessionCluster, path: str) -> tuple[int, str]:
    req = urllib.request.Request(cluster.url + path, headers={"Authorization": f"Bearer {cluster.token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_rest_savepoint_errors_are_4xx(session_cluster: SessionCluster, tmp_path: Path) -> None:
    assert _post(session_cluster, "/jobs/" + "0" * 32 + "/savepoints")[0] == 404
    assert _post(session_cluster, "/jobs/" + "0" * 32 + "/stop")[0] == 404
    assert _get(session_cluster, "/jobs/" + "0" * 32 + "/savepoints/abc")[0] == 404
    run = session_cluster.cli("run", "--cluster", "session", MAIN_JOB, "-p", "1", "--events", "1000", "--output", str(tmp_path / "T"))
    job_id = _job_id(run.stdout)
    status, body = _post(session_cluster, f"/jobs/{job_id}/stop")  # the job already finished
    assert status == 409 and "FINISHED" in body, body
    assert _get(session_cluster, f"/jobs/{job_id}/savepoints/nope")[0] == 404
    status, body = _post(session_cluster, f"/jobs/{job_id}/savepoints", b'{"target-directory": 5}')
    assert status == 400, body
