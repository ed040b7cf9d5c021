"""Shared checks of the running_totals example's Delta output against the generator."""
from __future__ import annotations

from pipelines.jobs.daily_events import day_events, reference_totals
from runtime.storage.delta_read import read_table


def totals_by_user_day(path: str) -> dict[tuple[int, str], tuple[int, int]]:
    """(user, day) -> (events_total, value_total) of the table; fails on a duplicate (user, day)."""
    seen: dict[tuple[int, str], tuple[int, int]] = {}
    for r in read_table(path).to_pylist():
        key = (r["user_id"], r["day"])
        assert key not in seen, f"duplicate row for {key}"
        seen[key] = (r["events_total"], r["value_total"])
    return seen


def day_rows(path: str, day: str) -> dict[int, tuple[int, int]]:
    """user -> totals of one day's rows."""
    return {u: t for (u, d), t in totals_by_user_day(path).items() if d == day}


def expected_for_day(day: str, events_per_day: int) -> dict[int, tuple[int, int]]:
    """Totals through `day` of the users with events on `day` (an independent count)."""
    through = reference_totals(day, events_per_day)
    return {u: through[u] for u in set(day_events(day, events_per_day)["user_id"].tolist())}
