"""Keyed event-time and processing-time timers of one operator.

Port of Flink's InternalTimerServiceImpl: timers are (key, namespace, timestamp), deduplicated,
kept in a priority queue and fired in timestamp order (ties: registration order). Event-time
timers fire from `advance_watermark`; processing-time timers through one physical timer on the
task's ProcessingTimeService for the earliest timer (its callback runs on the task thread).
Before a timer fires, the keyed backend's current key is set to the timer's key.
Timers belong to key groups and snapshot per key group, like keyed state: entries (key, namespace,
timestamp) of kind "timer" under the state names "__timers__/<service>/event" and ".../processing".
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

from runtime.core.checkpoint import KeyedSnapshot
from runtime.core.records import MIN_TIMESTAMP
from runtime.state.backend import TIMER_KIND, KeyedStateBackend, StateError


class InternalTimer(NamedTuple):
    """Flink: TimerHeapInternalTimer. A NamedTuple: one is made per firing timer (often one per record)."""

    timestamp: int
    key: Any
    namespace: Any


class Triggerable(Protocol):
    """Flink: Triggerable: what an operator does when one of its timers fires.

    A triggerable may also have `on_event_time_bucket(timestamp, {(key, namespace): key group})`
    (not None): then event-time timers are handed over a timestamp at once, removed from the queue
    first, and it must fire them in order with the backend's key set to each timer's key. It may
    only have it (see the window operator) while its firing registers and deletes no event-time timers.
    """

    def on_event_time(self, timer: InternalTimer) -> None: ...

    def on_processing_time(self, timer: InternalTimer) -> None: ...


class _TimerQueue:
    """Timers bucketed by timestamp: a heap of distinct timestamps, and per timestamp an
    insertion-ordered dict (key, namespace) -> key group.

    Firing order is Flink's: timestamp order, ties in registration order. Windows register one
    timer per (key, window) at the same timestamp (the window's end), so the heap holds a few
    timestamps instead of one entry per timer, and duplicates and deletions are dict operations.
    """

    __slots__ = ("heap", "buckets")

    def __init__(self) -> None:
        self.heap: list[int] = []  # distinct timestamps with a bucket (a bucket may be empty)
        self.buckets: dict[int, dict[tuple[Any, Any], int]] = {}

    def add(self, kg: int, key: Any, ns: Any, ts: int) -> bool:
        bucket = self.buckets.get(ts)
        if bucket is None:
            bucket = self.buckets[ts] = {}
            heapq.heappush(self.heap, ts)
        ident = (key, ns)
        if ident in bucket:
            return False
        bucket[ident] = kg
        return True

    def delete(self, key: Any, ns: Any, ts: int) -> None:
        bucket = self.buckets.get(ts)
        if bucket is not None:
            bucket.pop((key, ns), None)

    def peek_ts(self) -> int | None:
        heap, buckets = self.heap, self.buckets
        while heap:
            ts = heap[0]
            if buckets[ts]:
                return ts
            heapq.heappop(heap)
            del buckets[ts]
        return None

    def fire_buckets_until(self, t: int, fire_bucket: Callable[[int, dict[tuple[Any, Any], int]], None]) -> None:
        """Hand over every timestamp's timers <= t at once, in order, as {(key, namespace): key group}
        in registration order, removed from the queue first. Only for a triggerable whose firing
        never registers or deletes timers of this queue."""
        heap, buckets = self.heap, self.buckets
        while heap and heap[0] <= t:
            ts = heapq.heappop(heap)
            bucket = buckets.pop(ts)
            if bucket:
                fire_bucket(ts, bucket)

    def fire_until(self, t: int, fire: Callable[[int, int, Any, Any], None]) -> bool:
        """fire(ts, kg, key, ns) for every timer <= t in order, each removed before it fires;
        timers registered or deleted meanwhile are honoured (one deleted and registered again while
        its timestamp fires keeps its place among the ties; Flink promises no order among ties).
        Whether any fired."""
        heap, buckets = self.heap, self.buckets
        fired = False
        while heap and heap[0] <= t:
            ts = heap[0]
            bucket = buckets[ts]
            while bucket:
                for ident in list(bucket):
                    kg = bucket.pop(ident, None)
                    if kg is None:
                        continue  # deleted by an earlier timer of this round
                    fired = True
                    fire(ts, kg, ident[0], ident[1])
                    if heap[0] < ts:
                        break  # an earlier timer was registered: it goes first
                else:
                    continue
                break
            if heap[0] == ts and not bucket:
                heapq.heappop(heap)
                del buckets[ts]
        return fired

    def __len__(self) -> int:
        return sum(map(len, self.buckets.values()))

    def pin(self) -> Callable[[], dict[int, list[tuple[Any, Any, int]]]]:
        """Copy the buckets now (C speed); the supplier lists the copy's timers in firing order
        as {key group: [(key, namespace, timestamp)]}."""
        pinned = {ts: b.copy() for ts, b in self.buckets.items() if b}

        def supplier() -> dict[int, list[tuple[Any, Any, int]]]:
            out: dict[int, list[tuple[Any, Any, int]]] = {}
            for ts in sorted(pinned):
                for (key, ns), kg in pinned[ts].items():
                    out.setdefault(kg, []).append((key, ns, ts))
            return out

        return supplier


class InternalTimerService:
    """Flink: InternalTimerServiceImpl. Task thread only."""

    def __init__(
        self,
        name: str,
        backend: KeyedStateBackend,
        processing_time_service: Any,
        triggerable: Triggerable,
        after_processing_timers: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._backend = backend
        self._pts = processing_time_service
        self._triggerable = triggerable
        self._after_processing_timers = after_processing_timers
        self._event = _TimerQueue()
        self._processing = _TimerQueue()
        self._watermark = MIN_TIMESTAMP
        self._physical: set[int] = set()  # times of physical processing timers still pending

    # time --------------------------------------------------------------------------------
    def current_processing_time(self) -> int:
        return int(self._pts.current_processing_time())

    def current_watermark(self) -> int:
        return self._watermark

    # registration (for the backend's current key) ----------------------------------------
    def _current(self) -> tuple[int, Any]:
        kg = self._backend.current_key_group
        if kg < 0:
            raise StateError(
                f"timer service {self.name!r}: timers can only be set while an element or timer of a "
                "KeyedStream is being processed (no current key)"
            )
        return kg, self._backend.get_current_key()

    def register_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        kg, key = self._current()
        self._event.add(kg, key, namespace, int(timestamp))

    def register_event_time_timer_at(self, key_group: int, key: Any, namespace: Any, timestamp: int) -> None:
        """For a key the caller names (with its key group) instead of the backend's current key."""
        self._event.add(key_group, key, namespace, timestamp)

    def delete_event_time_timer(self, namespace: Any, timestamp: int) -> None:
        self._event.delete(self._backend.get_current_key(), namespace, int(timestamp))

    def register_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        kg, key = self._current()
        ts = int(timestamp)
        if self._processing.add(kg, key, namespace, ts):
            self._ensure_physical_timer(ts)

    def delete_processing_time_timer(self, namespace: Any, timestamp: int) -> None:
        # Like Flink, the physical timer stays; when it fires it finds nothing due.
        self._processing.delete(self._backend.get_current_key(), namespace, int(timestamp))

    def num_event_time_timers(self) -> int:
        return len(self._event)

    def num_processing_time_timers(self) -> int:
        return len(self._processing)

    # firing ------------------------------------------------------------------------------
    def advance_watermark(self, timestamp: int) -> None:
        """Fire every event-time timer <= timestamp (timers they register included)."""
        self._watermark = timestamp
        bulk = getattr(self._triggerable, "on_event_time_bucket", None)
        if bulk is not None:
            self._event.fire_buckets_until(timestamp, bulk)
        else:
            self._event.fire_until(timestamp, self._fire_event_time)

    def _fire_event_time(self, ts: int, kg: int, key: Any, ns: Any) -> None:
        self._backend.set_current_key_and_group(key, kg)
        self._triggerable.on_event_time(InternalTimer(ts, key, ns))

    def _fire_processing_time(self, ts: int, kg: int, key: Any, ns: Any) -> None:
        self._backend.set_current_key_and_group(key, kg)
        self._triggerable.on_processing_time(InternalTimer(ts, key, ns))

    def _ensure_physical_timer(self, ts: int) -> None:
        # one physical timer at the earliest due time is enough (Flink: nextTimer)
        if self._physical and min(self._physical) <= ts:
            return
        self._physical.add(ts)
        self._pts.register_timer(ts, self._on_processing_time)

    def _on_processing_time(self, time: int) -> None:
        """Callback of the ProcessingTimeService (task thread)."""
        self._physical.discard(time)
        # fire everything due by the clock now, not only by the physical timer's time: a late
        # callback then makes one firing round (one output batch) instead of several
        due = max(time, self.current_processing_time())
        q = self._processing
        fired = q.fire_until(due, self._fire_processing_time)
        nxt = q.peek_ts()
        if nxt is not None:
            self._ensure_physical_timer(nxt)
        if fired and self._after_processing_timers is not None:
            self._after_processing_timers()

    # checkpoints -------------------------------------------------------------------------
    def state_names(self) -> tuple[str, str]:
        """The keyed-snapshot state names of this service's event-time and processing-time timers."""
        return (f"__timers__/{self.name}/event", f"__timers__/{self.name}/processing")

    def snapshot_sync(self) -> Callable[[], KeyedSnapshot]:
        """Synchronous part: pin both queues; the supplier builds the timers' keyed entries."""
        parts = list(zip(self.state_names(), (self._event.pin(), self._processing.pin())))

        def supplier() -> KeyedSnapshot:
            out: KeyedSnapshot = {}
            for name, timers_of in parts:
                for kg, entries in timers_of().items():
                    out.setdefault(kg, {})[name] = (TIMER_KIND, entries)
            return out

        return supplier

    def restore_keyed(self, snapshot: KeyedSnapshot) -> None:
        """Re-register this service's timers of the key groups this subtask owns (others are ignored);
        processing-time timers are armed again on the ProcessingTimeService."""
        rng = self._backend.key_group_range
        for name, queue in zip(self.state_names(), (self._event, self._processing)):
            for kg, states in snapshot.items():
                entry = states.get(name)
                if entry is None or kg not in rng:
                    continue
                for key, ns, ts in entry[1]:
                    queue.add(kg, key, ns, int(ts))
        nxt = self._processing.peek_ts()
        if nxt is not None:
            self._ensure_physical_timer(nxt)
