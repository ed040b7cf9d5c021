"""A session cluster operated through the CLI: many jobs share its slots, isolation, list/info/cancel, stop."""
from __future__ import annotations

import os
import re
import signal
import stat
from pathlib import Path

import pytest

from tests.integration.cluster.conftest import PROGRAM, SessionCluster, millrace, pid_alive, start_session_cluster, stop_session_cluster
from tests.integration.cluster.programs.squares import reference
from tests.waiting import wait_until


def _job_id(stdout: str) -> str:
    found = re.search(r"JobID ([0-9a-f]{32})", stdout)
    assert found, stdout
    return found.group(1)


def _final_totals(path: Path) -> dict[int, int]:
    import deltalake

    rows = deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    totals: dict[int, int] = {}
    for r in rows:
        totals[r["key"]] = max(totals.get(r["key"], 0), r["total"])
    return totals


def _state(cluster: SessionCluster, job_id: str) -> str:
    return cluster.client().job_details(job_id).model_dump(by_alias=True, mode="json")["state"]


def _subtask_tms(cluster: SessionCluster, job_id: str) -> set[str]:
    d = cluster.client().job_details(job_id).model_dump(by_alias=True, mode="json")
    return {st["taskmanager-id"] for v in d["vertices"] for st in v["subtasks"] if st.get("status") == "RUNNING"}


def test_cluster_file_is_private_and_on_loopback(session_cluster):
    path = session_cluster.home / "cluster.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert session_cluster.url.startswith("http://127.0.0.1:")
    out = session_cluster.cli("cluster", "status")
    assert out.returncode == 0 and "running" in out.stdout, out.stdout + out.stderr


def test_attached_run_list_and_info(session_cluster, tmp_path):
    out = session_cluster.cli("run", str(PROGRAM), "--cluster", "session", "-p", "2", "--records", "200", "--output", str(tmp_path / "t"))
    assert out.returncode == 0, out.stdout + out.stderr
    job_id = _job_id(out.stdout)
    assert "-> RUNNING" in out.stdout and "-> FINISHED" in out.stdout
    assert _final_totals(tmp_path / "t") == reference(200)
    listed = session_cluster.cli("list")
    assert listed.returncode == 0 and re.search(rf"{job_id}\s+FINISHED", listed.stdout), listed.stdout
    info = session_cluster.cli("info", job_id)
    assert info.returncode == 0, info.stderr
    assert "FINISHED" in info.stdout and "parallelism 2" in info.stdout and "subtask 1: FINISHED" in info.stdout


def test_jobs_run_at_once_and_slots_return_to_the_pool(session_cluster, tmp_path):
    jobs = []
    for i in range(3):  # three jobs of one slot each on a cluster that starts with two TaskManagers
        out = session_cluster.cli(
            "run", str(PROGRAM), "--cluster", "session", "-d", "-p", "1", "--records", "80", "--sleep-ms", "100", "--output", str(tmp_path / f"t{i}"),
            "--name", f"concurrent-{i}",
        )
        assert out.returncode == 0, out.stdout + out.stderr
        jobs.append(_job_id(out.stdout))
    client = session_cluster.client()
    # all three run at the same time: the ResourceManager started a third TaskManager for them
    wait_until(lambda: all(_state(session_cluster, j) == "RUNNING" and _subtask_tms(session_cluster, j) for j in jobs), what="three jobs running")
    assert len({tm for j in jobs for tm in _subtask_tms(session_cluster, j)}) == 3
    wait_until(lambda: all(_state(session_cluster, j) == "FINISHED" for j in jobs), what="three jobs finished")
    for i in range(3):
        assert _final_totals(tmp_path / f"t{i}") == reference(80)
    # slots go back; the extra TaskManager is released after the idle timeout, the two stay
    def all_slots_free() -> bool:
        o = client.overview().model_dump(by_alias=True, mode="json")
        return o["slots-available"] == o["slots-total"] == 2

    wait_until(all_slots_free, what="idle TaskManager released")


def test_detached_job_can_be_inspected_and_cancelled(session_cluster, tmp_path):
    out = session_cluster.cli(
        "run", str(PROGRAM), "--cluster", "session", "--detached", "-p", "1", "--records", "1000", "--sleep-ms", "50", "--output", str(tmp_path / "t")
    )
    assert out.returncode == 0, out.stdout + out.stderr
    job_id = _job_id(out.stdout)
    wait_until(lambda: _subtask_tms(session_cluster, job_id), what="subtasks running")
    info = session_cluster.cli("info", job_id)
    assert "RUNNING" in info.stdout and "on tm-" in info.stdout, info.stdout
    cancel = session_cluster.cli("cancel", job_id)
    assert cancel.returncode == 0, cancel.stderr
    wait_until(lambda: _state(session_cluster, job_id) == "CANCELED", what="cancelled")
    again = session_cluster.cli("cancel", job_id)
    assert again.returncode != 0 and "already ended" in again.stderr, again.stderr


def test_failed_job_exits_non_zero_with_its_cause(session_cluster, tmp_path):
    out = session_cluster.cli("run", str(PROGRAM), "--cluster", "session", "-p", "1", "--records", "20", "--fail-at", "7", "--output", str(tmp_path / "t"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "ValueError: record 7 is poisoned" in out.stderr and "Traceback" in out.stderr


def test_attached_run_prints_the_cause_of_each_failure_as_it_happens(session_cluster, tmp_path):
    """Each failure's root cause (exception, operator, task, TaskManager) on its own line, before the
    status change it causes: the job restarts twice and then fails, on the same poisoned record."""
    out = session_cluster.cli("run", str(PROGRAM), "--cluster", "session", "-p", "1", "--records", "20", "--fail-at", "7",
                              "--restart-attempts", "2", "--output", str(tmp_path / "t"))
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    failures = [i for i, line in enumerate(lines) if " failure: ValueError: record 7 is poisoned " in line]
    assert len(failures) == 3, out.stdout
    for attempt, i in enumerate(failures):
        assert f"(operator 'Map', task Collection Source -> Map (1/1)#{attempt}, TaskManager tm-" in lines[i], lines[i]
    # every failure comes before the status change it caused: RESTARTING twice (a job-wide restart), then FAILING
    changes = [(i, found.group(1)) for i, line in enumerate(lines) if (found := re.search(r"\] job \w+ -> (\w+)", line))]
    after = [next(status for j, status in changes if j > i) for i in failures]
    assert after == ["RESTARTING", "RESTARTING", "FAILING"], out.stdout


def test_bad_input_gets_messages(session_cluster, tmp_path):
    out = session_cluster.cli("info", "0" * 32)
    assert out.returncode == 2 and "unknown job" in out.stderr.lower(), out.stderr
    nowhere = millrace(tmp_path, "list")
    assert nowhere.returncode == 2 and "millrace cluster start" in nowhere.stderr, nowhere.stderr
    both = session_cluster.cli("run", str(PROGRAM), "--cluster", "session", "--mode", "per-job", "--output", str(tmp_path / "t"))
    assert both.returncode == 2 and "use one of them" in both.stderr
    assert "Traceback" not in out.stderr + nowhere.stderr + both.stderr


def test_killed_task_manager_fails_only_the_jobs_on_it(session_cluster, tmp_path):
    """Session-mode isolation: a lost TaskManager takes down the jobs with tasks on it, no others."""
    def run_detached(records: int, output: str, name: str) -> str:
        out = session_cluster.cli(
            "run", str(PROGRAM), "--cluster", "session", "-d", "-p", "1", "--records", str(records), "--sleep-ms", "50", "--output", str(tmp_path / output),
            "--name", name,
        )
        return _job_id(out.stdout)

    a = run_detached(400, "a", "victim")
    b = run_detached(60, "b", "bystander")
    tms_a = wait_until(lambda: _subtask_tms(session_cluster, a), what="victim running")
    tms_b = wait_until(lambda: _subtask_tms(session_cluster, b), what="bystander running")
    assert not tms_a & tms_b, "the two jobs must not share a TaskManager for this test"
    victim_tm = next(iter(tms_a))
    tms = [t.model_dump(by_alias=True, mode="json") for t in session_cluster.client().task_managers()]
    pid = next(t for t in tms if t["id"] == victim_tm)
    os.kill(int(pid.get("pid") or pid.get("hardware", {}).get("pid")), signal.SIGKILL)
    wait_until(lambda: _state(session_cluster, a) == "FAILED", timeout=30, what="victim failed")
    wait_until(lambda: _state(session_cluster, b) == "FINISHED", timeout=60, what="bystander finished")
    assert _final_totals(tmp_path / "b") == reference(60)
    exc = session_cluster.client().job_details(a).model_dump(by_alias=True, mode="json")
    assert victim_tm in str(exc), exc


def test_stop_leaves_no_process_behind(tmp_path):
    cluster = start_session_cluster(tmp_path, "--taskmanagers", "1")
    tms = wait_until(lambda: cluster.client().task_managers(), what="a TaskManager")
    tm_pids = [int(t.model_dump(by_alias=True, mode="json").get("pid") or 0) for t in tms]
    out = stop_session_cluster(cluster)
    assert out.returncode == 0 and "stopped" in out.stdout, out.stdout + out.stderr
    assert not pid_alive(cluster.pid)
    assert not any(pid_alive(p) for p in tm_pids if p)
    assert not (tmp_path / "cluster.json").exists()
    again = millrace(tmp_path, "cluster", "stop")
    assert again.returncode == 2 and "no cluster is running" in again.stderr


@pytest.mark.parametrize("flag", ["--detached"])
def test_detached_needs_a_cluster(tmp_path, flag):
    out = millrace(tmp_path, "run", str(PROGRAM), flag, "--output", str(tmp_path / "t"))
    assert out.returncode == 2 and "--detached needs a cluster" in out.stderr
