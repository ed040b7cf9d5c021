"""The live events: the daily events continued, appended to a Delta table commit by commit.

The `live_events` table (`<warehouse>/live_events`, beside `daily_events`, with its columns
user_id, value, ts_ms, day, partitioned by day) is the input of the live running_totals job, which
follows it with a continuous DeltaSource. Its events continue the daily ones: global indices of the
generator in pipelines/jobs/daily_events.py from the first index of a start day (the day after the
last daily day) on, appended in index (= event time) order.

Appends are idempotent and resumable, as Spark's idempotent Delta writes (txnAppId/txnVersion):
every commit records the application transaction (appender id, the index after its last event),
so an appender continues where the table's last append ended, whichever process made it, and an
append retried after a crash is skipped if it had landed. The appender id names the events per
day (which fixes the index -> day mapping), so an append with another events_per_day is refused on
a table that holds events. One appender per table at a time. A commit never spans two days (an
append that crosses midnight is two commits), so "the first version holding day D" is a version
boundary: the live job starts there when it continues a daily savepoint of day D-1.

Appenders: the Dagster asset `live_events` (pipelines/live.py; its schedule appends a minute's
worth every minute), or this module as a long-running process that appends at a rate:

    .venv/bin/python -m pipelines.live_events --table warehouse/live_events --rate 1000 \\
        --events-per-day 100000 [--start-day 2026-01-03] [--commit-interval-ms 1000] [--until-day D]

It prints one JSON line per commit: {"version", "first", "end", "day", "committed_ms"}.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from types import FrameType

import numpy as np
import pyarrow as pa

from pipelines.jobs.daily_events import EVENT_COLUMNS, day_index, day_name, event_columns
from runtime.core.errors import ConfigurationError, MillraceError
from runtime.storage.delta_commit import committed_version
from runtime.storage.delta_read import read_commit, snapshot, table_version
from runtime.storage.delta_write import TableAppender, create_table

TABLE = "live_events"
PARTITION_BY = ["day"]
SCHEMA = pa.schema([("user_id", pa.int64()), ("value", pa.int64()), ("ts_ms", pa.int64()), ("day", pa.string())])


def appender_id(events_per_day: int) -> str:
    """The application id of the appends (Delta `txn`): its version is the next global index."""
    return f"millrace-live-events-{events_per_day}-per-day"


@dataclass(frozen=True)
class Appended:
    """One commit of an append: events [first, end) of `day`; version None: it was there already."""

    version: int | None
    first: int
    end: int
    day: str


def create(path: str, storage_options: dict[str, str] | None = None) -> int:
    """Create the empty table unless there is one (a job may follow it before the first append); its version."""
    return create_table(path, SCHEMA, PARTITION_BY, storage_options)


def next_index(path: str, events_per_day: int, storage_options: dict[str, str] | None = None) -> int | None:
    """The global index the next append starts at; None if nothing was appended with `events_per_day`."""
    return committed_version(path, appender_id(events_per_day), storage_options)


def start_index(path: str, events_per_day: int, start_day: str | None, storage_options: dict[str, str] | None = None) -> int:
    """Where the next append starts: where the table's appends ended, or (first append) at `start_day`."""
    nxt = next_index(path, events_per_day, storage_options)
    if nxt is not None:
        return nxt
    if table_version(path, storage_options) is not None and snapshot(path, None, storage_options).files:
        raise ConfigurationError(
            f"live events {path}: the table holds events, but none appended with {events_per_day:,} events per day; "
            "append with the events per day its events were appended with (as daily_events'), or start a new table"
        )
    if not start_day:
        raise ConfigurationError(f"live events {path}: the first append needs a start day (the day after the last daily day)")
    return day_index(start_day) * events_per_day


def table_appender(path: str, events_per_day: int, storage_options: dict[str, str] | None = None) -> TableAppender:
    """The table kept open for appends with `events_per_day` (one per appender: each commit then costs no log read)."""
    return TableAppender(path, appender_id(events_per_day), PARTITION_BY, storage_options)


def append_events(path: str, first: int, end: int, events_per_day: int, storage_options: dict[str, str] | None = None,
                  appender: TableAppender | None = None) -> list[Appended]:
    """Append global indices [first, end): one idempotent commit per day they touch."""
    appender = appender or table_appender(path, events_per_day, storage_options)
    done = []
    while first < end:
        d = first // events_per_day
        hi = min(end, (d + 1) * events_per_day)
        cols = event_columns(np.arange(first, hi, dtype=np.int64), events_per_day)
        day = day_name(d)
        data = pa.table({**{c: pa.array(cols[c], pa.int64()) for c in EVENT_COLUMNS}, "day": pa.array([day] * (hi - first), pa.string())},
                        schema=SCHEMA)
        version = appender.append(data, hi)
        done.append(Appended(version, first, hi, day))
        first = hi
    return done


def append(path: str, events: int, events_per_day: int, start_day: str | None = None,
           storage_options: dict[str, str] | None = None) -> list[Appended]:
    """Append the next `events` events (see start_index for where they start)."""
    first = start_index(path, events_per_day, start_day, storage_options)
    return append_events(path, first, first + events, events_per_day, storage_options)


def first_version_of_day(path: str, day: str, storage_options: dict[str, str] | None = None) -> int:
    """The first version of the table whose events are of `day` or later (the next version if there is
    none yet): where a live job that continues a savepoint of the day before starts. Walks back from the
    newest commit through the commits of `day` and later only (one small log read each)."""
    day_index(day)
    newest = table_version(path, storage_options)
    if newest is None:
        raise ConfigurationError(f"live events {path}: there is no table (append the live events first)")
    version = newest
    while version >= 0:
        commit = read_commit(path, version, PARTITION_BY, storage_options)
        if commit is None:
            raise ConfigurationError(
                f"live events {path}: commit {version} is no longer in the table's log and may hold events of {day} or later; "
                "give the live job an explicit starting version"
            )
        days = [str(f.partition_values.get("day")) for f in commit.added]
        if days and max(days) < day:
            break  # commits without data (the table's creation, a compaction) do not decide
        version -= 1
    return version + 1


def run(path: str, rate: int, events_per_day: int, start_day: str | None = None, commit_interval_ms: int = 1000,
        until: int | None = None, storage_options: dict[str, str] | None = None, emit: Callable[[str], None] = print) -> int:
    """Append at `rate` events per second, a commit (per day) every `commit_interval_ms`, until global
    index `until` (forever if None; SIGTERM or SIGINT end it between commits). Returns the next index."""
    if rate < 1 or commit_interval_ms < 1:
        raise ConfigurationError(f"live events appender: rate and commit interval must be >= 1, got {rate}, {commit_interval_ms}")
    create(path, storage_options)
    nxt = base = start_index(path, events_per_day, start_day, storage_options)
    appender = table_appender(path, events_per_day, storage_options)
    started = time.monotonic()
    while until is None or nxt < until:
        due = base + int(rate * (time.monotonic() - started))
        end = due if until is None else min(due, until)
        if end > nxt:
            for a in append_events(path, nxt, end, events_per_day, storage_options, appender):
                emit(json.dumps({**asdict(a), "committed_ms": int(time.time() * 1000)}))
            nxt = end
        time.sleep(commit_interval_ms / 1000.0)
    return nxt


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--table", required=True, help="the live events Delta table (created if there is none)")
    p.add_argument("--rate", type=int, default=1_000, help="events per second")
    p.add_argument("--events-per-day", type=int, default=100_000, help="events in one day (as daily_events')")
    p.add_argument("--start-day", default=None, help="first append only: the day the live events start (the day after the last daily day)")
    p.add_argument("--commit-interval-ms", type=int, default=1_000, help="one commit (per day) every this many ms")
    p.add_argument("--until-day", default=None, help="stop after the last event of this day (default: run until stopped)")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, _stop)
    until = None if args.until_day is None else (day_index(args.until_day) + 1) * args.events_per_day
    try:
        run(args.table, args.rate, args.events_per_day, args.start_day, args.commit_interval_ms, until,
            emit=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        pass
    except MillraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
