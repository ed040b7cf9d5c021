"""Processing-time timers for a task, run on the task thread between inputs (Flink's mailbox)."""
from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Callable


class TimerHandle:
    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class TaskMailbox:
    """Implements ProcessingTimeService; `run_due()` is called by the task loop."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._heap: list[tuple[int, int, Callable[[int], None], TimerHandle]] = []
        self._seq = itertools.count()

    def current_processing_time(self) -> int:
        return int(self._clock() * 1000)

    def register_timer(self, timestamp_ms: int, callback: Callable[[int], None]) -> TimerHandle:
        handle = TimerHandle()
        heapq.heappush(self._heap, (timestamp_ms, next(self._seq), callback, handle))
        return handle

    def seconds_until_next(self, cap: float) -> float:
        if not self._heap:
            return cap
        return max(0.0, min(cap, (self._heap[0][0] - self.current_processing_time()) / 1000.0))

    def run_due(self) -> int:
        ran = 0
        now = self.current_processing_time()
        while self._heap and self._heap[0][0] <= now:
            ts, _, cb, handle = heapq.heappop(self._heap)
            if not handle.cancelled:
                cb(ts)
                ran += 1
        return ran
