"""Ctrl-C and SIGTERM at any moment (TaskManagers on Spark): no process stays behind and the output
table is untouched or complete.

- `millrace run` (embedded): the run's process group is signalled, as a terminal does, once the run
  is seen in the phase the case names (Spark starting, TaskManagers launching, every task of a
  rate-limited job running); exit 0 counts only with the whole result in the table;
- `millrace cluster start` interrupted while the cluster starts: the cluster runs in a session of
  its own, out of the terminal's reach, so the command must stop it;
- a running session cluster whose process group is signalled (`millrace cluster stop`'s fallback,
  a service manager, a shutdown): idle, with TaskManagers launching, under a running job, at a
  job's end.
Dagster runs terminated at several moments are in test_dagster_ui.py.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from pipelines.jobs import windowed_sum
from tests.e2e.leftovers import (
    assert_untouched_or_complete,
    command_line,
    descendants,
    kill_sessions,
    session_processes,
    still_there,
)
from tests.integration.cluster.conftest import SessionCluster, millrace, pid_alive
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "pipelines" / "jobs" / "windowed_sum.py")
EVENTS = 300_000


def _cli(home: Path, *args: str) -> subprocess.Popen:
    """The CLI in a session of its own (so the test can signal its process group as a terminal would),
    working in `home` (Spark's default warehouse is under the working directory)."""
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, MILLRACE_HOME=str(home))
    env.pop("MILLRACE_TOKEN", None)
    return subprocess.Popen([sys.executable, "-m", "runtime.cli", *args], cwd=home, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)


class _Output:
    """The CLI's output (stdout and stderr), read on a thread as it comes, so a test can wait for a line."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def count(self, pattern: str) -> int:
        return sum(1 for line in list(self.lines) if re.search(pattern, line))

    def text(self, last: int = 4000) -> str:
        self._thread.join(10)
        return "\n".join(self.lines)[-last:]


# the embedded run's phases, as its INFO log shows them (runtime.deploy.minicluster, .spark_provider,
# .jobmanager.resource_manager, .taskmanager.task)
CLUSTER_UP = r"MiniCluster up: "
TM_SUBMITTED = r"submitted Spark job for TaskManager "
TM_REGISTERED = r"\[ResourceManager\] TaskManager \S+ registered"
TASK_RUNNING = r"runtime\.taskmanager\.task: \[job \w+ \| .* \(\d+/\d+\)#\d+ @ \S+\] running$"
JOB_ENDED = r"job \w+ -> (FINISHED|FAILED|CANCELED)"
PARALLELISM = 2
TASKS = 2 * PARALLELISM  # two chains (source side, window side) at p=2
RATE = 20_000  # EVENTS take 15 s at this rate: "every task running" is a window, not an instant


def _spark_jvm_started(sid: int) -> bool:
    return any("/bin/java " in line for line in session_processes(sid))


def _phase(out: _Output, moment: str, sid: int) -> bool:
    """The run is in `moment` now: reached, and the next phase not yet (a signal later proves nothing)."""
    if moment == "spark-starting":  # the JVM runs, the SparkContext (and with it the JobManager) is not up
        return _spark_jvm_started(sid) and not out.count(CLUSTER_UP)
    if moment == "task-managers-launching":  # every TaskManager's Spark job submitted, none registered
        return out.count(TM_SUBMITTED) == PARALLELISM and not out.count(TM_REGISTERED)
    # every task RUNNING, the rate-limited job far from its end
    return out.count(TASK_RUNNING) == TASKS and not out.count(JOB_ENDED)


# every moment once, each signal more than once (SIGINT and SIGTERM share one handler; a variant
# per moment and signal cost the suite ~15 s each for no new path)
@pytest.mark.parametrize(
    "moment, sig",
    [
        ("spark-starting", signal.SIGINT),
        ("task-managers-launching", signal.SIGINT),
        ("tasks-running", signal.SIGTERM),
    ],
    ids=["spark-starting", "task-managers-launching", "tasks-running-sigterm"],
)
def test_signalled_run_leaves_no_process_and_an_untouched_or_complete_table(tmp_path: Path, moment: str, sig: int) -> None:
    out = tmp_path / "out"
    proc = _cli(tmp_path / "home", "--log-level", "INFO", "run", JOB, "-p", str(PARALLELISM),
                "--events", str(EVENTS), "--rate", str(RATE), "--output", str(out))
    output = _Output(proc)
    try:
        def reached() -> bool:
            assert proc.poll() is None, f"the run ended before '{moment}':\n{output.text()}"
            return _phase(output, moment, proc.pid)

        wait_until(reached, 120, f"the run reaching '{moment}'", interval=0.05)
        os.killpg(proc.pid, sig)  # as a terminal does: the whole process group
        proc.wait(timeout=60)
        # the orderly stop's exit code (not death by the signal); 0 only with the whole result written
        assert proc.returncode in (0, 128 + sig), output.text()
        assert still_there(lambda: session_processes(proc.pid)) == []  # no JVM, no TaskManager, no Python worker
    finally:
        kill_sessions([proc.pid])
    assert_untouched_or_complete(out, windowed_sum.reference(EVENTS), finished=proc.returncode == 0)


# --- millrace cluster start, interrupted while the cluster starts -------------------------------------

def _cluster_process(cli: subprocess.Popen) -> int | None:
    return next((p for p in descendants(cli.pid) if "runtime.deploy.cluster_entrypoint" in command_line(p)), None)


@pytest.mark.parametrize(
    "after_jvm_s, sig", [(0.5, signal.SIGINT), (2.0, signal.SIGTERM)], ids=["jvm-launching-ctrl-c", "spark-context-starting-sigterm"],
)
def test_interrupted_cluster_start_stops_what_it_started(tmp_path: Path, after_jvm_s: float, sig: int) -> None:
    home = tmp_path / "home"
    cli = _cli(home, "--log-level", "INFO", "cluster", "start", "--taskmanagers", "2")
    sessions = [cli.pid]
    try:
        cluster = wait_until(lambda: _cluster_process(cli), 60, "the cluster process start", interval=0.05)
        sessions.append(cluster)  # its own session: the signal below does not reach it
        wait_until(lambda: any("/bin/java " in line for line in session_processes(cluster)), 60, "Spark's JVM start", interval=0.05)
        time.sleep(after_jvm_s)
        assert cli.poll() is None, "the cluster was ready before the interrupt: this run proves nothing"
        os.killpg(cli.pid, sig)
        output, _ = cli.communicate(timeout=90)
        assert cli.returncode == 128 + sig, output
        # the command waits for the cluster to stop: nothing of it is left once it returned
        assert [line for sid in sessions for line in session_processes(sid)] == []
        assert not (home / "cluster.json").exists()
    finally:
        kill_sessions(sessions)


# --- a running session cluster whose process group is signalled ---------------------------------------

def _port_open(url: str) -> bool:
    parsed = urlparse(url)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((parsed.hostname, parsed.port)) == 0


def _submit(cluster: SessionCluster, out: Path, events: int, rate: int) -> str:
    run = cluster.cli("run", JOB, "--cluster", "session", "--detached", "-p", "2", "--events", str(events), "--rate", str(rate), "--output", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    return re.search(r"JobID (\w+)", run.stdout).group(1)


# moment -> (events, rate, share of the events the sources have emitted when the signal goes):
# "job-running" a quarter into a 10 s job; "job-ending" with 90% out, about when the job's last
# records and its one commit land (either outcome is allowed)
JOBS = {"job-running": (400_000, 40_000, 0.25), "job-ending": (300_000, 150_000, 0.9)}


def _emitted(client, job_id: str) -> int:
    """Records the job's sources have sent on (REST metrics of its first vertex, the source chain)."""
    return client.job_details(job_id).vertices[0].metrics.write_records


@pytest.mark.parametrize(
    "moment, sig",
    [
        ("task-managers-launching", signal.SIGINT),
        # an idle cluster (TaskManagers up, no job) is the job-running moment without its job: left out for the suite's time
        ("job-running", signal.SIGTERM),
        ("job-ending", signal.SIGINT),
    ],
    ids=["task-managers-launching-sigint", "job-running-sigterm", "job-ending-sigint"],
)
def test_signalled_session_cluster_stops_everything(tmp_path: Path, moment: str, sig: int) -> None:
    home, out = tmp_path / "home", tmp_path / "out"
    start = millrace(home, "--log-level", "INFO", "cluster", "start", "--taskmanagers", "2", "--max-taskmanagers", "2", timeout=240)
    assert start.returncode == 0, start.stdout + start.stderr
    cluster = SessionCluster(home)
    events = 0
    try:
        client = cluster.client()
        if moment != "task-managers-launching":
            wait_until(lambda: len(client.task_managers()) >= 2, 120, "two TaskManagers registering")
        if moment in JOBS:
            events, rate, share = JOBS[moment]
            job_id = _submit(cluster, out, events, rate)
            wait_until(lambda: client.job_details(job_id).status_counts.get("RUNNING", 0) == 4, 60, "every task of the job running", interval=0.05)
            wait_until(lambda: _emitted(client, job_id) >= share * events, 60, f"{share:.0%} of the events emitted", interval=0.02)
        os.killpg(cluster.pid, sig)
        wait_until(lambda: not pid_alive(cluster.pid), 60, "the cluster process exit")
        assert still_there(lambda: session_processes(cluster.pid)) == []  # JVM, Spark's Python workers (the TaskManagers)
        assert not _port_open(cluster.url)
        assert not (home / "cluster.json").exists()
    finally:
        kill_sessions([cluster.pid])
    if events:
        assert_untouched_or_complete(out, windowed_sum.reference(events))
