"""Shared checks of the running_totals example's Delta output against the generator, and the live
events appender as its own process."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from benchmarks.delta_appender import AppenderProcess
from pipelines.jobs.daily_events import USERS, day_events, day_index, day_name, event_columns, reference_totals
from runtime.storage.delta_read import read_table


def totals_by_user_day(path: str) -> dict[tuple[int, str], tuple[int, int]]:
    """(user, day) -> (events_total, value_total) of the table; fails on a duplicate (user, day)."""
    seen: dict[tuple[int, str], tuple[int, int]] = {}
    t = read_table(path, columns=["user_id", "day", "events_total", "value_total"])
    for u, d, e, v in zip(*(t.column(c).to_pylist() for c in t.column_names)):
        assert (u, d) not in seen, f"duplicate row for {(u, d)}"
        seen[(u, d)] = (e, v)
    return seen


def day_rows(path: str, day: str) -> dict[int, tuple[int, int]]:
    """user -> totals of one day's rows."""
    return {u: t for (u, d), t in totals_by_user_day(path).items() if d == day}


def expected_for_day(day: str, events_per_day: int) -> dict[int, tuple[int, int]]:
    """Totals through `day` of the users with events on `day` (an independent count)."""
    through = reference_totals(day, events_per_day)
    return {u: through[u] for u in set(day_events(day, events_per_day)["user_id"].tolist())}


def expected_by_day(days: Iterable[str], events_per_day: int) -> dict[str, dict[int, tuple[int, int]]]:
    """expected_for_day of each of `days`, counted in one pass over the generator up to the last one."""
    wanted = {day_index(d) for d in days}
    events = np.zeros(USERS, dtype=np.int64)
    values = np.zeros(USERS, dtype=np.int64)
    out: dict[str, dict[int, tuple[int, int]]] = {}
    for d in range(max(wanted, default=-1) + 1):
        cols = event_columns(np.arange(d * events_per_day, (d + 1) * events_per_day, dtype=np.int64), events_per_day)
        events += np.bincount(cols["user_id"], minlength=USERS)
        values += np.bincount(cols["user_id"], weights=cols["value"], minlength=USERS).astype(np.int64)
        if d in wanted:
            out[day_name(d)] = {int(u): (int(events[u]), int(values[u])) for u in np.unique(cols["user_id"])}
    return out


def live_appender(table: str, rate: int, events_per_day: int, start_day: str, commit_interval_ms: int = 200) -> AppenderProcess:
    """pipelines/live_events.py appending to `table` at `rate` events per second in its own process."""
    return AppenderProcess.of([
        "-m", "pipelines.live_events", "--table", table, "--rate", str(rate), "--events-per-day", str(events_per_day),
        "--start-day", start_day, "--commit-interval-ms", str(commit_interval_ms),
    ])
