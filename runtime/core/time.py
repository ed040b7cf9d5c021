"""Time and Duration, mirroring pyflink.common.time (millisecond precision)."""
from __future__ import annotations


class Duration:
    """A length of time; Millrace keeps milliseconds (PyFlink wraps java.time.Duration)."""

    __slots__ = ("_millis",)

    def __init__(self, millis: int) -> None:
        self._millis = int(millis)

    @staticmethod
    def of_millis(millis: int) -> Duration:
        return Duration(millis)

    @staticmethod
    def of_seconds(seconds: float) -> Duration:
        return Duration(int(seconds * 1000))

    @staticmethod
    def of_minutes(minutes: float) -> Duration:
        return Duration(int(minutes * 60_000))

    @staticmethod
    def of_hours(hours: float) -> Duration:
        return Duration(int(hours * 3_600_000))

    @staticmethod
    def of_days(days: float) -> Duration:
        return Duration(int(days * 86_400_000))

    @staticmethod
    def of_nanos(nanos: int) -> Duration:
        return Duration(nanos // 1_000_000)

    @staticmethod
    def zero() -> Duration:
        return Duration(0)

    def to_milliseconds(self) -> int:
        return self._millis

    def to_millis(self) -> int:
        return self._millis

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duration) and other._millis == self._millis

    def __hash__(self) -> int:
        return hash(self._millis)

    def __repr__(self) -> str:
        return f"Duration({self._millis} ms)"


class Time(Duration):
    """PyFlink's (deprecated but common) Time: Time.seconds(5) etc."""

    __slots__ = ()

    @staticmethod
    def milliseconds(milliseconds: int) -> Time:
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: float) -> Time:
        return Time(int(seconds * 1000))

    @staticmethod
    def minutes(minutes: float) -> Time:
        return Time(int(minutes * 60_000))

    @staticmethod
    def hours(hours: float) -> Time:
        return Time(int(hours * 3_600_000))

    @staticmethod
    def days(days: float) -> Time:
        return Time(int(days * 86_400_000))

    def __repr__(self) -> str:
        return f"Time({self._millis} ms)"


def to_millis(value: Duration | int | float) -> int:
    """Accept a Duration/Time or a plain number of milliseconds."""
    if isinstance(value, Duration):
        return value.to_milliseconds()
    return int(value)
