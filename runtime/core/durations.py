"""Durations in Flink's notation ("500 ms", "10 s", "1 min"), shared by every config reader."""
from __future__ import annotations

import math
import re

from runtime.core.errors import ConfigurationError

_UNIT_MS: dict[str, float] = {}
for _names, _ms in (
    (("d", "day", "days"), 86_400_000.0),
    (("h", "hour", "hours"), 3_600_000.0),
    (("min", "m", "minute", "minutes"), 60_000.0),
    (("s", "sec", "secs", "second", "seconds"), 1_000.0),
    (("ms", "milli", "millis", "millisecond", "milliseconds"), 1.0),
    (("µs", "us", "micro", "micros", "microsecond", "microseconds"), 1e-3),
    (("ns", "nano", "nanos", "nanosecond", "nanoseconds"), 1e-6),
):
    for _n in _names:
        _UNIT_MS[_n] = _ms
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([^\d\s][^\s]*)?\s*$")


def parse_duration_ms(value: str | int | float) -> int:
    """Milliseconds of a duration in Flink's notation (TimeUtils.parseDuration).

    "100 ms", "1 s", "10s", "1 min", "2 h", "1 d"; a bare number is milliseconds. Units are
    case-insensitive; fractions are accepted ("1.5 s") and rounded to whole milliseconds.
    """
    if isinstance(value, bool):
        raise ConfigurationError(f"duration {value!r} is not a duration; use e.g. '500 ms', '10 s', '1 min' or milliseconds")
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise ConfigurationError(f"duration {value!r} must be a non-negative number of milliseconds")
        return int(round(value))
    m = _DURATION_RE.match(str(value))
    if m is None:
        raise ConfigurationError(
            f"duration {value!r} is not a duration; use a number with an optional unit, e.g. '500 ms', '10 s', "
            "'1 min', '2 h', or a bare number of milliseconds"
        )
    number, unit = m.group(1), (m.group(2) or "ms").lower()
    factor = _UNIT_MS.get(unit)
    if factor is None:
        raise ConfigurationError(
            f"duration {value!r} has an unknown unit {unit!r}; use one of d, h, min, s, ms, us, ns (or their long names)"
        )
    return int(round(float(number) * factor))


def format_duration_ms(ms: int) -> str:
    """The shortest exact Flink notation for `ms` ("1 s", "1 min", "250 ms")."""
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"
