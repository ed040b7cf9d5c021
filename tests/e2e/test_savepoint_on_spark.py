"""Acceptance: stop/resume exactly once with a rescale on a session cluster whose TaskManagers run on Spark."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster.conftest import start_session_cluster, stop_session_cluster
from tests.integration.cluster.test_savepoint_cli import stop_and_resume

pytestmark = pytest.mark.e2e


def _java_children(pid: int) -> list[int]:
    """Children of `pid` whose command line is a JVM: PySpark's gateway, i.e. TaskManagers come from Spark."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid and b"java" in (d / "cmdline").read_bytes():
                out.append(int(d.name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def test_stop_and_resume_with_a_rescale_on_spark_task_managers(tmp_path: Path) -> None:
    """The issue's numbers: 300,000 events at 30,000/s, p=2, stopped after a few seconds, resumed at 3 and (another run) at 1."""
    cluster = start_session_cluster(tmp_path / "home", "--provider", "spark", "--taskmanagers", "2", "--max-taskmanagers", "3")
    try:
        assert _java_children(cluster.pid), "the session cluster should run a Spark driver (a JVM child process)"
        stop_and_resume(cluster, tmp_path / "to3", 3, events=300_000, rate=30_000)
        stop_and_resume(cluster, tmp_path / "to1", 1, events=300_000, rate=30_000)
    finally:
        stop_session_cluster(cluster)
