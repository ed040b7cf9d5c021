"""Reactive mode on a session cluster whose TaskManagers are Spark tasks (issue 26, acceptance 1):
the main job (checkpointed, throttled) starts on one TaskManager at p=1; `millrace cluster scale`
adds one -> p=2, another -> p=3; a SIGKILLed TaskManager -> p=2, with no job failure; the Delta
table, read with Spark, equals the plain-Python reference row for row."""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from pipelines.jobs import windowed_sum
from tests.e2e.test_main_job_on_spark import _read_delta
from tests.integration.cluster.conftest import SessionCluster, millrace, stop_session_cluster
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
JOB = str(ROOT / "pipelines" / "jobs" / "windowed_sum.py")
EVENTS, RATE = 160_000, 8_000  # ~20 s of input: the three rescales and the kill are done 6-11 s in (load 4-10)


def test_reactive_job_follows_the_task_managers_of_a_spark_session_cluster(spark, tmp_path: Path) -> None:
    home, out = tmp_path / "home", str(tmp_path / "ws")
    started = millrace(home, "cluster", "start", "--taskmanagers", "1", "--max-taskmanagers", "3", timeout=240)
    assert started.returncode == 0, started.stdout + started.stderr
    cluster = SessionCluster(home)
    client = cluster.client()
    try:
        wait_until(lambda: len(client.task_managers()) == 1, timeout=120, what="the first TaskManager on Spark")
        run = cluster.cli(
            "run", JOB, "--cluster", "session", "-d", "-p", "1",
            "-D", "scheduler-mode=reactive",
            "-D", "jobmanager.adaptive-scheduler.resource-stabilization-timeout=1 s",
            "-D", "jobmanager.adaptive-scheduler.scaling-interval.min=0 ms",
            "-D", "restart-strategy.type=fixed-delay", "-D", "restart-strategy.fixed-delay.attempts=10",
            "-D", "restart-strategy.fixed-delay.delay=500 ms",
            "--events", str(EVENTS), "--rate", str(RATE), "--checkpoint-interval-ms", "500", "--output", out, timeout=180,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        job_id = re.search(r"JobID ([0-9a-f]+)", run.stdout).group(1)

        def running_at(p: int) -> bool:
            d = client.job_details(job_id)
            return d.scheduler == "reactive" and d.scheduler_state == "Executing" and all(
                v.parallelism == p and v.tasks.get("RUNNING") == p for v in d.vertices
            )

        wait_until(lambda: running_at(1), timeout=120, what="the job at p=1 on one TaskManager", interval=0.2)
        for n in (2, 3):
            scaled = cluster.cli("cluster", "scale", "--taskmanagers", str(n))
            assert scaled.returncode == 0, scaled.stdout + scaled.stderr
            wait_until(lambda n=n: running_at(n), timeout=180, what=f"the job at p={n} on {n} TaskManagers", interval=0.2)

        # SIGKILL one TaskManager (a Spark task's Python process): the job goes on at 2, not failed
        victim = client.task_managers()[-1]
        os.kill(victim.pid, signal.SIGKILL)
        wait_until(lambda: any(r.to_parallelism and max(r.to_parallelism.values()) == 2 and max(r.from_parallelism.values()) == 3
                               for r in client.job_details(job_id).rescales),
                   timeout=120, what="the job rescaled 3 -> 2 after the kill", interval=0.2)
        wait_until(lambda: client.job_result(job_id).status.is_globally_terminal, timeout=300, what="the job's end")
        result = client.job_result(job_id)
        assert result.status.value == "FINISHED", result.error
        details = client.job_details(job_id)
        ups = [(max(r.from_parallelism.values()), max(r.to_parallelism.values())) for r in details.rescales]
        assert (1, 2) in ups and (2, 3) in ups and (3, 2) in ups, ups
        assert all(tm.spark_executor_id for tm in client.task_managers())
    finally:
        stop = stop_session_cluster(cluster)
    assert stop.returncode == 0, stop.stdout + stop.stderr
    assert _read_delta(spark, out) == windowed_sum.reference(EVENTS)
