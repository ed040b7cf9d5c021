"""The events of the running-totals example, day by day (the `daily_events` asset writes them).

Day d (0-based from 2026-01-01) holds the events with global index g in [d*N, (d+1)*N) of the main
job's generator (N = events per day):
    x = ((g*1103515245 + 42) % 2147483647)**2 % 2147483647
    user_id = x % 10000, value = (x // 10000) % 100
    ts_ms = midnight UTC of day d + (g - d*N) * 86_400_000 // N
so a day's events are spread evenly over the day, in index order. Everything here is vectorised
over numpy index arrays (x < 2**31, so x*x < 2**62: no overflow in int64).
"""
from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import numpy as np

from pipelines.jobs.windowed_sum import MODULUS

FIRST_DAY = date(2026, 1, 1)
DAY_MS = 86_400_000
USERS = 10_000
EVENT_COLUMNS = ("user_id", "value", "ts_ms")


def day_index(day: str) -> int:
    """0 for 2026-01-01; a ValueError names a day that is not YYYY-MM-DD or before the first day."""
    try:
        d = date.fromisoformat(day)
    except ValueError as e:
        raise ValueError(f"day {day!r} is not a date in the form YYYY-MM-DD") from e
    if d < FIRST_DAY:
        raise ValueError(f"day {day} is before the first day of the events, {FIRST_DAY.isoformat()}")
    return (d - FIRST_DAY).days


def day_name(d: int) -> str:
    return (FIRST_DAY + timedelta(days=int(d))).isoformat()


def day_start_ms(d: int | np.ndarray) -> int | np.ndarray:
    """Epoch ms of the midnight (UTC) that starts day index d."""
    epoch0 = int(datetime(FIRST_DAY.year, FIRST_DAY.month, FIRST_DAY.day, tzinfo=UTC).timestamp() * 1000)
    return epoch0 + d * DAY_MS


def event_columns(g: np.ndarray, events_per_day: int) -> dict[str, np.ndarray]:
    """user_id, value, ts_ms of the global indices `g` (int64)."""
    g = np.asarray(g, dtype=np.int64)
    x = ((g * 1103515245 + 42) % MODULUS) ** 2 % MODULUS
    d = g // events_per_day
    ts = day_start_ms(d) + (g - d * events_per_day) * DAY_MS // events_per_day
    return {"user_id": x % USERS, "value": (x // USERS) % 100, "ts_ms": ts}


def day_events(day: str, events_per_day: int) -> dict[str, np.ndarray]:
    """The columns of one day's events, in index (= time) order."""
    d = day_index(day)
    return event_columns(np.arange(d * events_per_day, (d + 1) * events_per_day, dtype=np.int64), events_per_day)


def reference_totals(last_day: str, events_per_day: int, first_index: int = 0) -> dict[int, tuple[int, int]]:
    """user_id -> (events, sum of value) over every event from `first_index` to the end of `last_day`
    (an independent reference: a plain count over the generator, no Millrace involved)."""
    end = (day_index(last_day) + 1) * events_per_day
    events = np.zeros(USERS, dtype=np.int64)
    values = np.zeros(USERS, dtype=np.int64)
    for lo in range(first_index, end, 1 << 20):
        cols = event_columns(np.arange(lo, min(end, lo + (1 << 20)), dtype=np.int64), events_per_day)
        events += np.bincount(cols["user_id"], minlength=USERS)
        values += np.bincount(cols["user_id"], weights=cols["value"], minlength=USERS).astype(np.int64)
    return {int(u): (int(events[u]), int(values[u])) for u in np.flatnonzero(events)}
