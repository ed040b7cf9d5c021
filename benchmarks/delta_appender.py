"""Appends windowed_sum's events to a Delta table, one commit at a time: a live input for the
continuous DeltaSource (tests/integration/connectors, benchmarks/delta_tail.py).

Commit k (0-based, counted from --first-commit) holds events k*R .. (k+1)*R - 1 of windowed_sum's
generator (user_id, ts_ms, value), so the events of all commits are windowed_sum's first
commits*R events and `windowed_sum.reference` is the expected result of a job over them. After
each commit it prints one JSON line {"commit", "version", "rows", "committed_ms"} (the commit's
wall-clock time: benchmarks measure latency from it). Runs as its own process, like the Spark job
or Dagster asset that would append to the table in production.

    .venv/bin/python benchmarks/delta_appender.py --table /tmp/in --commits 50 --rows 400 --interval-ms 100
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository, for pipelines/

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from pipelines.jobs import windowed_sum

SCHEMA = pa.schema([("user_id", pa.int64()), ("ts_ms", pa.int64()), ("value", pa.int64())])


def commit_table(commit: int, rows: int) -> pa.Table:
    cols = windowed_sum.event_columns(np.arange(commit * rows, (commit + 1) * rows, dtype=np.int64))
    return pa.table({name: pa.array(cols[name], pa.int64()) for name in SCHEMA.names}, schema=SCHEMA)


def append(table: str, commit: int, rows: int) -> int:
    """Append commit `commit`; returns the table version it became."""
    write_deltalake(table, commit_table(commit, rows), mode="append")
    from deltalake import DeltaTable

    return int(DeltaTable(table).version())


class AppenderProcess:
    """This script in its own process and session (as another writer of the table would be);
    `lines` are its JSON lines so far, read by a thread; `stop()` kills its whole group.
    `AppenderProcess.of(argv)` runs another appender that prints one JSON line per commit
    (e.g. `-m pipelines.live_events ...`)."""

    def __init__(self, table: str, commits: int, first: int = 0, rows: int = 400, interval_ms: int = 100) -> None:
        self._spawn([os.path.abspath(__file__), "--table", table, "--commits", str(commits),
                     "--rows", str(rows), "--first-commit", str(first), "--interval-ms", str(interval_ms)])

    @classmethod
    def of(cls, argv: list[str]) -> AppenderProcess:
        """`python <argv>` from the repository's folder."""
        appender = cls.__new__(cls)
        appender._spawn(argv)
        return appender

    def _spawn(self, argv: list[str]) -> None:
        self.lines: list[dict[str, Any]] = []
        self.proc = subprocess.Popen(
            [sys.executable, *argv], stdout=subprocess.PIPE, text=True, start_new_session=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(json.loads(line))

    def committed(self) -> int:
        return len(self.lines)

    def wait(self, timeout: float = 120.0) -> None:
        rc = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        if rc != 0:
            raise RuntimeError(f"the appender ({' '.join(map(str, self.proc.args[1:]))}) exited with {rc} after {len(self.lines)} commits")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)  # its own session: the whole group
        self.proc.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", required=True)
    p.add_argument("--commits", type=int, required=True)
    p.add_argument("--rows", type=int, default=400, help="events per commit")
    p.add_argument("--first-commit", type=int, default=0)
    p.add_argument("--interval-ms", type=int, default=100, help="pause between commits")
    args = p.parse_args(argv)
    for k in range(args.first_commit, args.first_commit + args.commits):
        version = append(args.table, k, args.rows)
        print(json.dumps({"commit": k, "version": version, "rows": args.rows, "committed_ms": int(time.time() * 1000)}), flush=True)
        if args.interval_ms > 0:
            time.sleep(args.interval_ms / 1000.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
