"""A standalone Spark cluster (master + workers on 127.0.0.1) for e2e tests, via infra/spark_standalone.sh.

`standalone_spark_cluster(...)` is a context manager that always stops the cluster, also when the
test fails, and then checks that none of its JVMs (master, workers, executors) is left.
"""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "infra" / "spark_standalone.sh"
SPARK_DAEMON_CLASSES = (
    "org.apache.spark.deploy.master.Master",
    "org.apache.spark.deploy.worker.Worker",
    "org.apache.spark.executor.CoarseGrainedExecutorBackend",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def _session_of(pid: int) -> int | None:
    stat = _read(f"/proc/{pid}/stat")
    try:
        return int(stat.rsplit(")", 1)[1].split()[3]) if stat else None
    except (IndexError, ValueError):
        return None


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


class StandaloneSpark:
    """One cluster started by the script; `spark_processes()` lists every JVM that belongs to it."""

    def __init__(self, work_dir: Path, workers: int = 2, cores_per_worker: int = 1, memory_per_worker: str = "2g") -> None:
        self.work_dir = work_dir
        self.workers = workers
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.master_port = free_port()  # not 7077: never collide with a cluster someone started by hand
        self.master_url = f"spark://127.0.0.1:{self.master_port}"
        self.sessions: list[int] = []
        self.start_seconds = 0.0

    def _script(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SCRIPT), *args, "--work-dir", str(self.work_dir)],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
        )

    def start(self) -> StandaloneSpark:
        started = time.monotonic()
        out = self._script(
            "start", "--workers", str(self.workers), "--cores-per-worker", str(self.cores_per_worker),
            "--memory-per-worker", self.memory_per_worker, "--master-port", str(self.master_port), timeout=240,
        )
        self.start_seconds = time.monotonic() - started
        # record the daemons' sessions even if start failed half-way, so stop() can check them
        self.sessions = [int(p.read_text()) for p in (self.work_dir / "pids").glob("*.pid")]
        assert out.returncode == 0, f"spark_standalone.sh start failed:\n{out.stdout}\n{out.stderr}"
        assert out.stdout.strip().splitlines()[-1] == self.master_url, out.stdout
        return self

    def status(self) -> subprocess.CompletedProcess:
        return self._script("status", timeout=30)

    def stop(self) -> subprocess.CompletedProcess:
        return self._script("stop", timeout=120)

    def spark_processes(self) -> list[tuple[int, str]]:
        """Live processes (pid, command line) of this cluster: in a daemon's session, or a Spark JVM naming its port or work dir."""
        work = str(self.work_dir)
        found = []
        for pid in _pids():
            cmd = _read(f"/proc/{pid}/cmdline")
            if not cmd:
                continue
            mine = _session_of(pid) in self.sessions
            if not mine and any(c in cmd for c in SPARK_DAEMON_CLASSES):
                try:
                    cwd = os.readlink(f"/proc/{pid}/cwd")
                except OSError:
                    cwd = ""
                mine = f":{self.master_port}" in cmd or work in cmd or cwd.startswith(work)
            if mine:
                found.append((pid, cmd))
        return found


@contextlib.contextmanager
def standalone_spark_cluster(work_dir: Path, workers: int = 2, cores_per_worker: int = 1) -> Iterator[StandaloneSpark]:
    """Start the cluster; always stop it; then assert that nothing of it is left."""
    cluster = StandaloneSpark(work_dir, workers, cores_per_worker)
    try:
        yield cluster.start()
    except BaseException:
        cluster.stop()  # the test's own failure is the one to report
        raise
    out = cluster.stop()
    assert out.returncode == 0, f"spark_standalone.sh stop failed:\n{out.stdout}\n{out.stderr}"
    left = cluster.spark_processes()
    assert not left, f"processes of the standalone Spark cluster outlived stop: {[(pid, cmd[:300]) for pid, cmd in left]}"
