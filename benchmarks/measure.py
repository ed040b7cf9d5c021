"""What every benchmark shares: CPU seconds of the JobManager and TaskManager processes, the check
of windowed_sum's Delta output against the plain-Python reference, and one JSON line per row.

CPU time, not wall time, is the figure to compare on this shared 2-core machine: wall time moves
with whatever else runs, CPU seconds per million events much less (docs/benchmarks.md).
"""
from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from pipelines.jobs import windowed_sum

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of one process (its threads included, its children not); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15 of proc(5))


def machine_ticks() -> tuple[int, int, int]:
    """(all, idle + iowait, steal) clock ticks of the whole machine since boot, from /proc/stat."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice (guest time is inside user)
    return sum(values[:8]), values[3] + values[4], values[7]


def descendants(root: int) -> set[int]:
    """Pids of every process below `root` (a Spark JVM started by this process, its Python daemon and workers)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out: set[int] = set()
    todo = [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


class CpuMeter:
    """CPU seconds of groups of processes between enter and exit: "jm" (the JobManager), "tm" (the
    TaskManagers) and, where the benchmark asks, "spark" (the Spark JVM and its Python daemons).

    Each group's pids are asked again while the meter runs, so TaskManagers started during the span
    count from their start (their start-up is work of the run) and killed ones up to their last
    reading (at most `interval_s` of their work is lost). A pid counts in the first group that
    lists it. The JobManager of an embedded cluster is this process: the client's polling counts
    with it.
    """

    def __init__(self, groups: dict[str, Callable[[], Iterable[int]]] | None = None, interval_s: float = 0.5) -> None:
        self._groups = groups or {"jm": lambda: (os.getpid(),)}
        self._interval_s = interval_s
        self._first: dict[tuple[str, int], float] = {}
        self._last: dict[tuple[str, int], float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False

    @classmethod
    def for_cluster(cls, cluster: Any, spark: bool = False) -> CpuMeter:
        """An embedded MiniCluster: this process is the JobManager; its TaskManagers by their registered
        pids; with `spark`, every other process below this one (the Spark JVM, its daemons) as "spark"."""
        groups: dict[str, Callable[[], Iterable[int]]] = {
            "jm": lambda: (os.getpid(),),
            "tm": lambda: [t.pid for t in cluster.task_managers() if t.pid],
        }
        if spark:
            groups["spark"] = lambda: descendants(os.getpid())
        return cls(groups)

    @classmethod
    def process_tree(cls) -> CpuMeter:
        """This process as "jm" and everything below it as "spark" (a Spark job's driver and JVM)."""
        return cls({"jm": lambda: (os.getpid(),), "spark": lambda: descendants(os.getpid())})

    def _read(self) -> None:
        seen: set[int] = set()
        for group, pids in self._groups.items():
            try:
                listed = list(pids())
            except Exception:  # noqa: BLE001 - a cluster that is closing: keep the readings we have
                listed = [pid for (g, pid) in self._last if g == group]
            for pid in listed:
                if pid in seen:
                    continue
                seen.add(pid)
                cpu = process_cpu_s(pid)
                if cpu is None:
                    continue
                key = (group, pid)
                # a process first seen after the start counts from its own start
                self._first.setdefault(key, cpu if not self._started else 0.0)
                self._last[key] = cpu

    def _poll(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._read()

    def __enter__(self) -> CpuMeter:
        self._machine = machine_ticks()
        self._read()
        self._started = True
        self._thread = threading.Thread(target=self._poll, name="cpu-meter", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._read()
        total, idle, steal = (b - a for a, b in zip(self._machine, machine_ticks()))
        self._machine_busy_s = (total - idle - steal) / _TICKS
        self._steal_pct = 100.0 * steal / total if total else 0.0

    def seconds(self, group: str) -> float:
        return sum(self._last[k] - self._first[k] for k in self._last if k[0] == group)

    def fields(self, events: int) -> dict[str, Any]:
        """{"<group>_cpu_s" for jm, tm (always) and the others, "cpu_s_per_million_events": all groups together}."""
        names = ["jm", "tm", *(g for g in self._groups if g not in ("jm", "tm"))]
        out: dict[str, Any] = {f"{g}_cpu_s": round(self.seconds(g), 2) for g in names}
        total = sum(self.seconds(g) for g in names)
        out["cpu_s_per_million_events"] = round(total / (events / 1e6), 3) if events else None
        # what else ran: CPU the machine spent outside the measured processes, and what the
        # hypervisor took from this VM (steal): both slow the run's wall time, not its CPU seconds
        out["other_cpu_s"] = round(max(0.0, self._machine_busy_s - total), 2)
        out["steal_pct"] = round(self._steal_pct, 1)
        return out


@functools.lru_cache(maxsize=4)
def windowed_sum_reference(events: int) -> dict[tuple[int, int], tuple[int, int]]:
    return windowed_sum.reference(events)


def check_windowed_sum(path: str, events: int) -> dict[str, Any]:
    """windowed_sum's Delta table at `path` row for row against the plain-Python reference:
    {"rows", "duplicate_keys", "missing_keys", "wrong_values", "verified"}."""
    from deltalake import DeltaTable

    expected = windowed_sum_reference(events)
    table = DeltaTable(path).to_pyarrow_table()
    cols = [table.column(name).to_pylist() for name in windowed_sum.OUTPUT_COLUMNS]
    seen: dict[tuple[int, int], tuple[int, int]] = {}
    duplicates = wrong = 0
    for u, w, c, s in zip(*cols):
        key = (u, w)
        if key in seen:
            duplicates += 1
        seen[key] = (c, s)
        if expected.get(key) != (c, s):
            wrong += 1
    missing = sum(1 for k in expected if k not in seen)
    verified = not (duplicates or missing or wrong) and table.num_rows == len(expected)
    return {"rows": table.num_rows, "duplicate_keys": duplicates, "missing_keys": missing, "wrong_values": wrong, "verified": verified}


def emit(row: dict[str, Any]) -> dict[str, Any]:
    print(json.dumps(row), flush=True)
    return row


def require(rows: Iterable[dict[str, Any]]) -> int:
    """Exit status of a benchmark: 1 when a row's output was not verified (its figures show nothing)."""
    bad = [r.get("name", r) for r in rows if r.get("verified") is False]
    if bad:
        print(json.dumps({"unverified": bad}), flush=True)
    return 1 if bad else 0
