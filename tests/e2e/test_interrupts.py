"""Ctrl-C during an embedded run (TaskManagers on Spark): whatever the moment, no process of the run
stays behind and the output table is untouched or complete."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.jobs import windowed_sum

ROOT = Path(__file__).resolve().parents[2]
EVENTS = 300_000


def _session_processes(sid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=,cmd=", "-s", str(sid)], capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("moment_s", [1.5, 4.0, 6.0], ids=["spark-starting", "task-managers-launching", "tasks-running"])
def test_sigint_leaves_no_process_and_an_untouched_or_complete_table(tmp_path: Path, moment_s: float) -> None:
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "runtime.cli", "run", str(ROOT / "pipelines" / "jobs" / "windowed_sum.py"),
         "--events", str(EVENTS), "--output", str(out)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        time.sleep(moment_s)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal does: the whole process group
        proc.wait(60)
        deadline = time.monotonic() + 20
        while _session_processes(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _session_processes(proc.pid) == []  # no JVM, no TaskManager, no Python worker left
    finally:
        for line in _session_processes(proc.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    if not out.exists() or not any(out.iterdir()):
        return  # untouched
    from deltalake import DeltaTable

    rows = DeltaTable(str(out)).to_pyarrow_table().to_pylist()  # complete: the whole result, committed
    assert {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows} == windowed_sum.reference(EVENTS)
    assert {f.name for f in out.iterdir() if f.suffix == ".parquet"} <= {os.path.basename(u) for u in DeltaTable(str(out)).file_uris()}
