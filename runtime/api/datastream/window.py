"""Windows, window assigners and triggers (pyflink.datastream.window / Flink's windowing API).

Assigners put an element into zero or more windows; a trigger decides when a window's pane is
evaluated (FIRE) and/or dropped (PURGE). The WindowOperator (runtime.api.operators.window_operator)
drives both. Durations may be `Time`/`Duration` objects (anything with `to_milliseconds()`), a
`datetime.timedelta`, or a plain int of milliseconds.
"""
from __future__ import annotations

import abc
import datetime
import enum
from collections.abc import Callable, Collection, Iterable
from typing import Any, Generic, TypeVar

from runtime.api.datastream.state import ReducingStateDescriptor, ValueStateDescriptor
from runtime.core.records import MIN_TIMESTAMP

# the windows themselves live low in the layers (state and timers use them); here at PyFlink's path
from runtime.core.windows import CountWindow, GlobalWindow, TimeWindow, Window  # re-exported

T = TypeVar("T")
W = TypeVar("W", bound="Window")
# MergeCallback's window type: a class nested in a generic class needs a type variable of its own
MW = TypeVar("MW", bound="Window")


def to_milliseconds(duration: Any) -> int:
    """Milliseconds of a Time/Duration (`to_milliseconds()`), timedelta or int."""
    if duration is None:
        raise ValueError("a window size/slide/gap is required")
    f = getattr(duration, "to_milliseconds", None)
    if callable(f):
        return int(f())
    if isinstance(duration, datetime.timedelta):
        return int(duration / datetime.timedelta(milliseconds=1))
    return int(duration)


# --------------------------------------------------------------------------- triggers
class TriggerResult(enum.Enum):
    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger(abc.ABC, Generic[T, W]):
    """Flink: Trigger. Triggers keep their state in `ctx.get_partitioned_state` (per window)."""

    class TriggerContext(abc.ABC):
        @abc.abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def get_current_watermark(self) -> int: ...

        @abc.abstractmethod
        def register_processing_time_timer(self, time: int) -> None: ...

        @abc.abstractmethod
        def register_event_time_timer(self, time: int) -> None: ...

        @abc.abstractmethod
        def delete_processing_time_timer(self, time: int) -> None: ...

        @abc.abstractmethod
        def delete_event_time_timer(self, time: int) -> None: ...

        @abc.abstractmethod
        def get_partitioned_state(self, state_descriptor: Any) -> Any: ...

        def get_metric_group(self) -> Any:
            return None

    class OnMergeContext(TriggerContext):
        @abc.abstractmethod
        def merge_partitioned_state(self, state_descriptor: Any) -> None: ...

    # timestamp None: the record has none (Flink's Long.MIN_VALUE marker)
    @abc.abstractmethod
    def on_element(self, element: T, timestamp: int | None, window: W, ctx: Trigger.TriggerContext) -> TriggerResult: ...

    @abc.abstractmethod
    def on_processing_time(self, time: int, window: W, ctx: Trigger.TriggerContext) -> TriggerResult: ...

    @abc.abstractmethod
    def on_event_time(self, time: int, window: W, ctx: Trigger.TriggerContext) -> TriggerResult: ...

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: W, ctx: Trigger.OnMergeContext) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support merging windows")

    @abc.abstractmethod
    def clear(self, window: W, ctx: Trigger.TriggerContext) -> None: ...


class EventTimeTrigger(Trigger[Any, TimeWindow]):
    """Flink: EventTimeTrigger: fire once the watermark passes the window's end."""

    def on_element(self, element: Any, timestamp: int | None, window: TimeWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE  # the watermark is already past the window: fire at once
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window: TimeWindow, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> EventTimeTrigger:
        return EventTimeTrigger()

    def __repr__(self) -> str:
        return "EventTimeTrigger()"


class ProcessingTimeTrigger(Trigger[Any, TimeWindow]):
    """Flink: ProcessingTimeTrigger: fire when the wall clock passes the window's end."""

    def on_element(self, element: Any, timestamp: int | None, window: TimeWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        ctx.register_processing_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: TimeWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: TimeWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.FIRE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: TimeWindow, ctx: Trigger.OnMergeContext) -> None:
        if window.max_timestamp() > ctx.get_current_processing_time():
            ctx.register_processing_time_timer(window.max_timestamp())

    def clear(self, window: TimeWindow, ctx: Trigger.TriggerContext) -> None:
        ctx.delete_processing_time_timer(window.max_timestamp())

    @staticmethod
    def create() -> ProcessingTimeTrigger:
        return ProcessingTimeTrigger()

    def __repr__(self) -> str:
        return "ProcessingTimeTrigger()"


def _add(a: int, b: int) -> int:
    return a + b


class CountTrigger(Trigger[Any, Window]):
    """Flink: CountTrigger: fire every `count` elements of a pane (count kept in trigger state)."""

    def __init__(self, count: int) -> None:
        self.count = int(count)
        self._desc = ReducingStateDescriptor("count", _add)

    @staticmethod
    def of(count: int) -> CountTrigger:
        return CountTrigger(count)

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        state = ctx.get_partitioned_state(self._desc)
        state.add(1)
        if state.get() >= self.count:
            state.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        ctx.merge_partitioned_state(self._desc)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        ctx.get_partitioned_state(self._desc).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self.count})"


class PurgingTrigger(Trigger[Any, Window]):
    """Flink: PurgingTrigger: turns every FIRE of the nested trigger into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger) -> None:
        self.nested_trigger = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> PurgingTrigger:
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(r: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if r.is_fire() else r

    def on_element(self, element: Any, timestamp: int | None, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_element(element, timestamp, window, ctx))

    def on_event_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_event_time(time, window, ctx))

    def on_processing_time(self, time: int, window: Window, ctx: Trigger.TriggerContext) -> TriggerResult:
        return self._purging(self.nested_trigger.on_processing_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self.nested_trigger.can_merge()

    def on_merge(self, window: Window, ctx: Trigger.OnMergeContext) -> None:
        self.nested_trigger.on_merge(window, ctx)

    def clear(self, window: Window, ctx: Trigger.TriggerContext) -> None:
        self.nested_trigger.clear(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self.nested_trigger!r})"


class NeverTrigger(Trigger[Any, GlobalWindow]):
    """The default trigger of GlobalWindows: never fires."""

    def on_element(self, element: Any, timestamp: int | None, window: GlobalWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time: int, window: GlobalWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_processing_time(self, time: int, window: GlobalWindow, ctx: Trigger.TriggerContext) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True

    def on_merge(self, window: GlobalWindow, ctx: Trigger.OnMergeContext) -> None:
        pass

    def clear(self, window: GlobalWindow, ctx: Trigger.TriggerContext) -> None:
        pass


# --------------------------------------------------------------------------- assigners
class TimestampedValue:
    """An element in an evicting window's pane (Flink's TimestampedValue)."""

    __slots__ = ("value", "timestamp")

    def __init__(self, value: Any, timestamp: int | None) -> None:
        self.value, self.timestamp = value, timestamp

    def get_value(self) -> Any:
        return self.value

    def get_timestamp(self) -> int | None:
        return self.timestamp

    def has_timestamp(self) -> bool:
        return self.timestamp is not None

    def __reduce__(self):
        return (TimestampedValue, (self.value, self.timestamp))

    def __repr__(self) -> str:
        return f"TimestampedValue({self.value!r}, {self.timestamp})"


class Evictor(abc.ABC, Generic[T, W]):
    """Removes elements from a window's pane before and/or after the window function runs (Flink's
    Evictor). `elements` is the pane's list of TimestampedValues: remove from it in place."""

    @abc.abstractmethod
    def evict_before(self, elements: list[TimestampedValue], size: int, window: W, evictor_context: Any) -> None: ...

    @abc.abstractmethod
    def evict_after(self, elements: list[TimestampedValue], size: int, window: W, evictor_context: Any) -> None: ...


class _BeforeOrAfterEvictor(Evictor[Any, Window]):
    """Flink's built-in evictors: one rule, applied before the function or (do_evict_after) after it."""

    do_evict_after = False

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        raise NotImplementedError

    def evict_before(self, elements: list[TimestampedValue], size: int, window: Window, evictor_context: Any) -> None:
        if not self.do_evict_after:
            self._evict(elements, size)

    def evict_after(self, elements: list[TimestampedValue], size: int, window: Window, evictor_context: Any) -> None:
        if self.do_evict_after:
            self._evict(elements, size)


class CountEvictor(_BeforeOrAfterEvictor):
    """Keeps the last `max_count` elements (Flink's CountEvictor)."""

    def __init__(self, max_count: int, do_evict_after: bool = False) -> None:
        if not isinstance(max_count, int) or max_count < 0:
            raise ValueError(f"CountEvictor: max_count must be a non-negative int, got {max_count!r}")
        self.max_count, self.do_evict_after = max_count, do_evict_after

    @staticmethod
    def of(max_count: int, do_evict_after: bool = False) -> CountEvictor:
        return CountEvictor(max_count, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if size > self.max_count:
            del elements[: size - self.max_count]


class TimeEvictor(_BeforeOrAfterEvictor):
    """Keeps elements newer than the newest one's timestamp minus `window_size` (Flink's TimeEvictor)."""

    def __init__(self, window_size_ms: int, do_evict_after: bool = False) -> None:
        if window_size_ms < 0:
            raise ValueError(f"TimeEvictor: the window size must not be negative, got {window_size_ms}")
        self.window_size_ms, self.do_evict_after = window_size_ms, do_evict_after

    @staticmethod
    def of(window_time: Any, do_evict_after: bool = False) -> TimeEvictor:
        return TimeEvictor(to_milliseconds(window_time), do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        stamped = [e.timestamp for e in elements if e.timestamp is not None]
        if not stamped:
            return
        cut = max(stamped) - self.window_size_ms
        elements[:] = [e for e in elements if e.timestamp is None or e.timestamp > cut]



class DeltaEvictor(_BeforeOrAfterEvictor):
    """Removes elements whose delta to the newest element is >= `threshold` (Flink's DeltaEvictor)."""

    def __init__(self, threshold: float, delta_function: Callable[[Any, Any], float], do_evict_after: bool = False) -> None:
        self.threshold, self.delta_function, self.do_evict_after = threshold, delta_function, do_evict_after

    @staticmethod
    def of(threshold: float, delta_function: Callable[[Any, Any], float], do_evict_after: bool = False) -> DeltaEvictor:
        fn = delta_function.get_delta if hasattr(delta_function, "get_delta") else delta_function
        return DeltaEvictor(threshold, fn, do_evict_after)

    def _evict(self, elements: list[TimestampedValue], size: int) -> None:
        if not elements:
            return
        last = elements[-1].value
        elements[:] = [e for e in elements if self.delta_function(e.value, last) < self.threshold]



class WindowAssigner(abc.ABC, Generic[T, W]):
    """Flink/PyFlink: WindowAssigner."""

    class WindowAssignerContext(abc.ABC):
        @abc.abstractmethod
        def get_current_processing_time(self) -> int: ...

        @abc.abstractmethod
        def get_runtime_context(self) -> Any: ...

    # timestamp None: the record has none (Flink's Long.MIN_VALUE marker)
    @abc.abstractmethod
    def assign_windows(self, element: T, timestamp: int | None, context: WindowAssigner.WindowAssignerContext) -> Collection[W]: ...

    @abc.abstractmethod
    def get_default_trigger(self, env: Any = None) -> Trigger: ...

    @abc.abstractmethod
    def is_event_time(self) -> bool: ...

    def get_window_serializer(self) -> Any:
        return None


class MergingWindowAssigner(WindowAssigner[T, W]):
    """An assigner whose windows can merge (sessions). Flink: MergingWindowAssigner."""

    class MergeCallback(abc.ABC, Generic[MW]):
        @abc.abstractmethod
        def merge(self, to_be_merged: Iterable[MW], merge_result: MW) -> None: ...

    @abc.abstractmethod
    def merge_windows(self, windows: Iterable[W], callback: Any) -> None: ...


_NO_TIMESTAMP_MSG = (
    "Record has no timestamp (Flink: Long.MIN_VALUE marker) but {name} needs event time. "
    "Did you forget data_stream.assign_timestamps_and_watermarks(...) or a source watermark strategy?"
)


def _check_event_ts(timestamp: Any, name: str) -> int:
    if timestamp is None or timestamp <= MIN_TIMESTAMP:
        from runtime.core.errors import MillraceError

        raise MillraceError(_NO_TIMESTAMP_MSG.format(name=name))
    return int(timestamp)


class TumblingEventTimeWindows(WindowAssigner[Any, TimeWindow]):
    def __init__(self, size: int, offset: int = 0) -> None:
        if size <= 0 or abs(offset) >= size:
            raise ValueError("TumblingEventTimeWindows parameters must satisfy abs(offset) < size and size > 0")
        self.size = size
        self.offset = offset

    @staticmethod
    def of(size: Any, offset: Any = None) -> TumblingEventTimeWindows:
        return TumblingEventTimeWindows(to_milliseconds(size), 0 if offset is None else to_milliseconds(offset))

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[TimeWindow]:
        ts = _check_event_ts(timestamp, "TumblingEventTimeWindows")
        start = TimeWindow.get_window_start_with_offset(ts, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"TumblingEventTimeWindows({self.size}, {self.offset})"


class TumblingProcessingTimeWindows(WindowAssigner[Any, TimeWindow]):
    def __init__(self, size: int, offset: int = 0) -> None:
        if size <= 0 or abs(offset) >= size:
            raise ValueError("TumblingProcessingTimeWindows parameters must satisfy abs(offset) < size and size > 0")
        self.size = size
        self.offset = offset

    @staticmethod
    def of(size: Any, offset: Any = None) -> TumblingProcessingTimeWindows:
        return TumblingProcessingTimeWindows(to_milliseconds(size), 0 if offset is None else to_milliseconds(offset))

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[TimeWindow]:
        now = context.get_current_processing_time()
        start = TimeWindow.get_window_start_with_offset(now, self.offset, self.size)
        return [TimeWindow(start, start + self.size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"TumblingProcessingTimeWindows({self.size}, {self.offset})"


def _sliding(ts: int, size: int, slide: int, offset: int) -> list[TimeWindow]:
    last_start = TimeWindow.get_window_start_with_offset(ts, offset, slide)
    return [TimeWindow(s, s + size) for s in range(last_start, ts - size, -slide)]


class SlidingEventTimeWindows(WindowAssigner[Any, TimeWindow]):
    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        if size <= 0 or slide <= 0 or abs(offset) >= slide:
            raise ValueError("SlidingEventTimeWindows parameters must satisfy abs(offset) < slide and size > 0")
        self.size = size
        self.slide = slide
        self.offset = offset

    @staticmethod
    def of(size: Any, slide: Any, offset: Any = None) -> SlidingEventTimeWindows:
        return SlidingEventTimeWindows(
            to_milliseconds(size), to_milliseconds(slide), 0 if offset is None else to_milliseconds(offset)
        )

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[TimeWindow]:
        ts = _check_event_ts(timestamp, "SlidingEventTimeWindows")
        return _sliding(ts, self.size, self.slide, self.offset)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"SlidingEventTimeWindows({self.size}, {self.slide}, {self.offset})"


class SlidingProcessingTimeWindows(WindowAssigner[Any, TimeWindow]):
    def __init__(self, size: int, slide: int, offset: int = 0) -> None:
        if size <= 0 or slide <= 0 or abs(offset) >= slide:
            raise ValueError("SlidingProcessingTimeWindows parameters must satisfy abs(offset) < slide and size > 0")
        self.size = size
        self.slide = slide
        self.offset = offset

    @staticmethod
    def of(size: Any, slide: Any, offset: Any = None) -> SlidingProcessingTimeWindows:
        return SlidingProcessingTimeWindows(
            to_milliseconds(size), to_milliseconds(slide), 0 if offset is None else to_milliseconds(offset)
        )

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[TimeWindow]:
        return _sliding(context.get_current_processing_time(), self.size, self.slide, self.offset)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"SlidingProcessingTimeWindows({self.size}, {self.slide}, {self.offset})"


class SessionWindowTimeGapExtractor(abc.ABC):
    """PyFlink's SessionWindowTimeGapExtractor: the session gap (ms) an element opens."""

    @abc.abstractmethod
    def extract(self, element: Any) -> int: ...


class _SessionWindows(MergingWindowAssigner[Any, TimeWindow]):
    """What Flink's session assigners share: [start, start + gap), merged while they overlap or
    touch; start is the element's timestamp (event time) or now (processing time)."""

    event_time = True

    def _gap(self, element: Any) -> int:
        raise NotImplementedError

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[TimeWindow]:
        start = _check_event_ts(timestamp, type(self).__name__) if self.event_time else context.get_current_processing_time()
        return [TimeWindow(start, start + self._gap(element))]

    def merge_windows(self, windows: Iterable[TimeWindow], callback: Any) -> None:
        TimeWindow.merge_windows(windows, callback)

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger() if self.event_time else ProcessingTimeTrigger()

    def is_event_time(self) -> bool:
        return self.event_time


class _FixedGapSessionWindows(_SessionWindows):
    def __init__(self, session_gap: int) -> None:
        if session_gap <= 0:
            raise ValueError(f"{type(self).__name__} parameters must satisfy 0 < size")
        self.session_gap = session_gap

    def _gap(self, element: Any) -> int:
        return self.session_gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.session_gap})"


class _DynamicGapSessionWindows(_SessionWindows):
    def __init__(self, extractor: Any) -> None:
        if not (isinstance(extractor, SessionWindowTimeGapExtractor) or hasattr(extractor, "extract") or callable(extractor)):
            raise ValueError(f"with_dynamic_gap() needs a SessionWindowTimeGapExtractor, got {type(extractor).__name__}")
        self.extractor = extractor
        self._extract = extractor.extract if hasattr(extractor, "extract") else extractor

    def _gap(self, element: Any) -> int:
        gap = self._extract(element)
        if not isinstance(gap, int) or isinstance(gap, bool) or gap <= 0:
            raise ValueError(f"a session window's dynamic gap must be a positive number of milliseconds, got {gap!r} for {element!r}")
        return gap

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class DynamicEventTimeSessionWindows(_DynamicGapSessionWindows):
    """Flink: DynamicEventTimeSessionWindows: [ts, ts + extract(element))."""


class DynamicProcessingTimeSessionWindows(_DynamicGapSessionWindows):
    """Flink: DynamicProcessingTimeSessionWindows: [now, now + extract(element))."""

    event_time = False


class EventTimeSessionWindows(_FixedGapSessionWindows):
    """Flink: EventTimeSessionWindows: [ts, ts + gap), merged while they overlap or touch."""

    @staticmethod
    def with_gap(size: Any) -> EventTimeSessionWindows:
        return EventTimeSessionWindows(to_milliseconds(size))

    @staticmethod
    def with_dynamic_gap(extractor: SessionWindowTimeGapExtractor) -> DynamicEventTimeSessionWindows:
        """The gap per element: `extractor.extract(element)` milliseconds."""
        return DynamicEventTimeSessionWindows(extractor)


class ProcessingTimeSessionWindows(_FixedGapSessionWindows):
    event_time = False

    @staticmethod
    def with_gap(size: Any) -> ProcessingTimeSessionWindows:
        return ProcessingTimeSessionWindows(to_milliseconds(size))

    @staticmethod
    def with_dynamic_gap(extractor: SessionWindowTimeGapExtractor) -> DynamicProcessingTimeSessionWindows:
        return DynamicProcessingTimeSessionWindows(extractor)


class GlobalWindows(WindowAssigner[Any, GlobalWindow]):
    """Every element in one window per key; default trigger never fires (use .trigger(...))."""

    @staticmethod
    def create() -> GlobalWindows:
        return GlobalWindows()

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[GlobalWindow]:
        return [GlobalWindow()]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"


class CountTumblingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """PyFlink: CountTumblingWindowAssigner (KeyedStream.count_window(size)).

    Element n (0-based, per key) goes to CountWindow(n // size); the window fires when full.
    """

    def __init__(self, window_size: int) -> None:
        if window_size <= 0:
            raise ValueError("count window size must be > 0")
        self.window_size = int(window_size)
        self._count_descriptor = ValueStateDescriptor("tumble-count-assigner")

    @staticmethod
    def of(window_size: int) -> CountTumblingWindowAssigner:
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[CountWindow]:
        state = context.get_runtime_context().get_state(self._count_descriptor)
        n = state.value() or 0
        state.update(n + 1)
        return [CountWindow(n // self.window_size)]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        # PyFlink uses CountTrigger (FIRE); a full count window never receives another element,
        # so purging on fire gives the same output and frees the pane's state.
        return PurgingTrigger.of(CountTrigger(self.window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountTumblingWindowAssigner({self.window_size})"


class CountSlidingWindowAssigner(WindowAssigner[Any, CountWindow]):
    """PyFlink: CountSlidingWindowAssigner (KeyedStream.count_window(size, slide)).

    Window id k holds elements n in [k*slide, k*slide + size - 1] and fires when it has `size`.
    """

    def __init__(self, window_size: int, window_slide: int) -> None:
        if window_size <= 0 or window_slide <= 0:
            raise ValueError("count window size and slide must be > 0")
        self.window_size = int(window_size)
        self.window_slide = int(window_slide)
        self._count_descriptor = ValueStateDescriptor("slide-count-assigner")

    @staticmethod
    def of(window_size: int, window_slide: int) -> CountSlidingWindowAssigner:
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element: Any, timestamp: int | None, context: Any) -> list[CountWindow]:
        state = context.get_runtime_context().get_state(self._count_descriptor)
        n = state.value() or 0
        state.update(n + 1)
        last_id = n // self.window_slide
        start = last_id * self.window_slide
        end = start + self.window_size - 1
        out: list[CountWindow] = []
        while last_id >= 0 and start <= n <= end:
            out.append(CountWindow(last_id))
            last_id -= 1
            start -= self.window_slide
            end -= self.window_slide
        return out

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return PurgingTrigger.of(CountTrigger(self.window_size))

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"CountSlidingWindowAssigner({self.window_size}, {self.window_slide})"


__all__ = [
    "to_milliseconds",
    "Window",
    "TimeWindow",
    "CountWindow",
    "GlobalWindow",
    "TriggerResult",
    "Trigger",
    "EventTimeTrigger",
    "ProcessingTimeTrigger",
    "CountTrigger",
    "PurgingTrigger",
    "NeverTrigger",
    "WindowAssigner",
    "MergingWindowAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "EventTimeSessionWindows",
    "ProcessingTimeSessionWindows",
    "GlobalWindows",
    "CountTumblingWindowAssigner",
    "CountSlidingWindowAssigner",
]
