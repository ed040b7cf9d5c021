"""What an interrupted run may leave behind, for the tests that interrupt one: processes (found by
session or by ancestry, from /proc and ps) and its output table (untouched or complete).

Waiting is for a condition with a deadline (tests.waiting.wait_until, still_there), never a fixed time.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def session_processes(sid: int) -> list[str]:
    """'pid cmd' of every live process in session `sid` (a process started with start_new_session=True
    leads its own session; Spark's JVM, its Python daemon and workers stay in it). Zombies are left
    out: an exited child of a killed JVM waits for init to reap it, holding no memory and no port."""
    out = subprocess.run(["ps", "-o", "pid=,stat=,cmd=", "-s", str(sid)], capture_output=True, text=True).stdout
    rows = [line.split(None, 2) for line in out.splitlines() if line.strip()]
    return [f"{row[0]} {row[2] if len(row) > 2 else ''}".strip() for row in rows if not row[1].startswith("Z")]


def descendants(root: int) -> set[int]:
    """Pids of every process below `root` (children, their children, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = set(), [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def alive(pid: int) -> bool:
    """Running (a zombie is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def still_there(probe: Callable[[], list[T]], grace_s: float = 20.0) -> list[T]:
    """What `probe` still lists once it lists nothing or `grace_s` passed (processes may take a moment to end)."""
    deadline = time.monotonic() + grace_s
    left = probe()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = probe()
    return left


def kill_sessions(sids: Iterable[int]) -> None:
    """Clean-up after a failed test: SIGKILL whatever is left in these sessions."""
    for sid in sids:
        for line in session_processes(sid):
            try:
                os.kill(int(line.split()[0]), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


def assert_untouched_or_complete(out: Path, reference: dict, finished: bool = False) -> None:
    """A fresh output location after an interrupted windowed_sum run: nothing at all (a new table
    that never got a commit leaves not even its folder), or the whole result committed and no file
    beside the committed ones. `finished` (the run exited 0): the whole result must be there."""
    if not out.exists():
        assert not finished, f"the run finished, yet it left no table at {out}"
        return  # untouched
    from deltalake import DeltaTable

    assert (out / "_delta_log").is_dir(), f"a partial table was left: {sorted(p.name for p in out.iterdir())}"
    table = DeltaTable(str(out))
    rows = table.to_pyarrow_table().to_pylist()  # complete: the whole result, committed, each row once
    got = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows}
    assert len(rows) == len(reference), f"{len(rows)} rows for {len(reference)} (user, window) results ({len(rows) - len(got)} duplicated)"
    assert got == reference
    assert {f.name for f in out.iterdir() if f.suffix == ".parquet"} <= {os.path.basename(u) for u in table.file_uris()}
