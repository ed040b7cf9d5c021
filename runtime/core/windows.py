"""Windows: the namespaces of windowed keyed state and timers (Flink's TimeWindow, CountWindow,
GlobalWindow). Low in the layers, because state serialization and the backends handle them; the
API re-exports them at PyFlink's path (runtime.api.datastream.window)."""
from __future__ import annotations

import abc
import operator
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from runtime.core.records import MAX_TIMESTAMP


class Window(abc.ABC):
    __slots__ = ()

    @abc.abstractmethod
    def max_timestamp(self) -> int:
        """The largest timestamp that still belongs to this window."""


class TimeWindow(tuple, Window):
    """Flink: TimeWindow, the half-open interval [start, end).

    A tuple (start, end) underneath: windows are the namespaces of keyed state and timers, hashed
    and compared several times per record, which a tuple does in C (a dataclass's __hash__/__eq__
    are Python calls). Like a namedtuple it equals the plain tuple (start, end).
    """

    __slots__ = ()

    def __new__(cls, start: int, end: int) -> TimeWindow:
        return tuple.__new__(cls, (start, end))

    start = property(operator.itemgetter(0), doc="first timestamp in the window")
    end = property(operator.itemgetter(1), doc="first timestamp after the window")

    def __getnewargs__(self) -> tuple[int, int]:  # pickle: TimeWindow(start, end)
        return (self[0], self[1])

    def max_timestamp(self) -> int:
        return self.end - 1

    def intersects(self, other: TimeWindow) -> bool:
        # touching windows intersect: sessions [0,5) and [5,10) merge (Flink semantics)
        return self.start <= other.end and self.end >= other.start

    def cover(self, other: TimeWindow) -> TimeWindow:
        return TimeWindow(min(self.start, other.start), max(self.end, other.end))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        """Flink: TimeWindow.getWindowStartWithOffset (also correct for negative timestamps)."""
        remainder = (timestamp - offset) % window_size  # Python's % is already non-negative here
        return timestamp - remainder

    @staticmethod
    def merge_windows(windows: Iterable[TimeWindow], callback: Any) -> None:
        """Flink: TimeWindow.mergeWindows: merge overlapping windows, report groups of > 1."""
        merged: list[tuple[TimeWindow, list[TimeWindow]]] = []
        cur: tuple[TimeWindow, list[TimeWindow]] | None = None
        for cand in sorted(windows, key=lambda w: w.start):
            if cur is None:
                cur = (cand, [cand])
            elif cur[0].intersects(cand):
                cur = (cur[0].cover(cand), cur[1] + [cand])
            else:
                merged.append(cur)
                cur = (cand, [cand])
        if cur is not None:
            merged.append(cur)
        merge = callback.merge if hasattr(callback, "merge") else callback
        for result, group in merged:
            if len(group) > 1:
                merge(group, result)

    def __repr__(self) -> str:
        return f"TimeWindow(start={self.start}, end={self.end})"


@dataclass(frozen=True, slots=True)
class CountWindow(Window):
    """Flink: CountWindow (an id; never ends in time)."""

    id: int

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP


class GlobalWindow(Window):
    """The single window of GlobalWindows."""

    _instance: GlobalWindow | None = None

    def __new__(cls) -> GlobalWindow:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    @staticmethod
    def get() -> GlobalWindow:
        return GlobalWindow()

    def max_timestamp(self) -> int:
        return MAX_TIMESTAMP

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalWindow)

    def __hash__(self) -> int:
        return 0x61_0B_A1

    def __reduce__(self):
        return (GlobalWindow, ())

    def __repr__(self) -> str:
        return "GlobalWindow"
