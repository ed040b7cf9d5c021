"""Session clusters started through the CLI (`millrace cluster start`), always stopped afterwards."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = Path(__file__).parent / "programs" / "squares.py"


def millrace(home: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    env = dict(os.environ, MILLRACE_HOME=str(home))
    env.pop("MILLRACE_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "runtime.cli", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


class SessionCluster:
    def __init__(self, home: Path) -> None:
        self.home = home
        info = json.loads((home / "cluster.json").read_text())
        self.url, self.token, self.pid = info["url"], info["token"], info["pid"]

    def client(self):
        from runtime.rest.client import RestClusterClient

        return RestClusterClient(self.url, self.token)

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
        return millrace(self.home, *args, timeout=timeout)


def start_session_cluster(home: Path, *extra: str) -> SessionCluster:
    out = millrace(home, "cluster", "start", "--provider", "local", *extra, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return SessionCluster(home)


def stop_session_cluster(cluster: SessionCluster) -> subprocess.CompletedProcess:
    out = cluster.cli("cluster", "stop", timeout=120)
    if pid_alive(cluster.pid):  # the test failed in a way that left it running: do not leak it
        os.killpg(cluster.pid, signal.SIGKILL)
    return out


@pytest.fixture(scope="module")
def session_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionCluster]:
    """Two TaskManagers (one slot each) as local processes, up to four; idle ones above two kept 2 s."""
    cluster = start_session_cluster(tmp_path_factory.mktemp("millrace-home"), "--taskmanagers", "2", "--max-taskmanagers", "4", "--idle-timeout", "2")
    try:
        yield cluster
    finally:
        stop_session_cluster(cluster)
