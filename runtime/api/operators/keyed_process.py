"""KeyedStream.process(KeyedProcessFunction). Port of Flink's KeyedProcessOperator."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from runtime.api.datastream.functions import KeyedProcessFunction, TimeDomain, TimerService
from runtime.api.operators.runtime_context import AbstractKeyedOperator, close_function, open_function
from runtime.core.keys import KeyExtractor
from runtime.core.records import RecordBatch
from runtime.state import VOID_NAMESPACE
from runtime.state.timers import InternalTimer, InternalTimerService

USER_TIMERS = "user-timers"


class SimpleTimerService(TimerService):
    """Flink: SimpleTimerService: the user's view of the internal service (VoidNamespace)."""

    __slots__ = ("_svc",)

    def __init__(self, internal: InternalTimerService) -> None:
        self._svc = internal

    def current_processing_time(self) -> int:
        return self._svc.current_processing_time()

    def current_watermark(self) -> int:
        return self._svc.current_watermark()

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._svc.register_processing_time_timer(VOID_NAMESPACE, timestamp)

    def register_event_time_timer(self, timestamp: int) -> None:
        self._svc.register_event_time_timer(VOID_NAMESPACE, timestamp)

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._svc.delete_processing_time_timer(VOID_NAMESPACE, timestamp)

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._svc.delete_event_time_timer(VOID_NAMESPACE, timestamp)


class KeyedTimerContext:
    """The one mutable context object that serves process_element and on_timer (like Flink's).

    Shared by KeyedProcessOperator and KeyedCoProcessOperator; each mixes it into its
    function's OnTimerContext (see KeyedProcessContext / KeyedCoProcessContext).
    """

    __slots__ = ("_ts", "_domain", "_timer_service", "_op")

    def __init__(self, op: AbstractKeyedOperator, timer_service: TimerService) -> None:
        self._op = op
        self._timer_service = timer_service
        self._ts: int | None = None
        self._domain: int | None = None

    def timestamp(self) -> int | None:
        return self._ts

    def timer_service(self) -> TimerService:
        return self._timer_service

    def get_current_key(self) -> Any:
        assert self._op.keyed_state_backend is not None
        return self._op.keyed_state_backend.get_current_key()

    def output(self, output_tag: Any, value: Any) -> None:
        self._op.collect_side(output_tag.tag_id, value, self._ts)

    def time_domain(self) -> int:
        if self._domain is None:
            raise RuntimeError("time_domain() is only available in on_timer")
        return self._domain


class KeyedProcessContext(KeyedTimerContext, KeyedProcessFunction.OnTimerContext):
    __slots__ = ()


class AbstractKeyedProcessOperator(AbstractKeyedOperator):
    """What KeyedProcessOperator and KeyedCoProcessOperator share: the user timer service, the one
    context object, the per-record loop and on_timer.

    Outputs of process_element keep the input timestamp; outputs of an event-time on_timer carry
    the timer's timestamp; outputs of a processing-time on_timer carry none (Flink erases it).
    """

    context_type: type[KeyedTimerContext] = KeyedTimerContext

    def __init__(self, function: Any) -> None:
        super().__init__()
        self.function = function
        self._pctx: KeyedTimerContext | None = None

    def open(self) -> None:
        assert self.runtime_context is not None
        svc = self.get_internal_timer_service(USER_TIMERS, self)
        self._pctx = self.context_type(self, SimpleTimerService(svc))
        open_function(self.function, self.runtime_context)

    def close(self) -> None:
        try:
            close_function(self.function)
        finally:
            super().close()

    def _process_keyed(
        self, batch: RecordBatch, key: KeyExtractor, process: Callable[[Any, Any], Iterable[Any] | None]
    ) -> None:
        """Per record: set the current key, call process(value, ctx), collect with the input timestamp."""
        backend = self.keyed_state_backend
        ctx = self._pctx
        assert backend is not None and ctx is not None
        keys, kgs = self._keys_and_groups(key, batch)
        rows = batch.rows()
        tss = batch.timestamps.tolist() if batch.timestamps is not None else None
        collect_all = self.collect_all
        ctx._domain = None
        for i, value in enumerate(rows):
            if kgs is not None:
                backend.set_current_key_and_group(keys[i], kgs[i])
            else:
                backend.set_current_key(keys[i])
            t = tss[i] if tss is not None else None
            ctx._ts = t
            res = process(value, ctx)
            if res is not None:
                collect_all(res, t)
        self.flush_output()

    # Triggerable ---------------------------------------------------------------------------
    def on_event_time(self, timer: InternalTimer) -> None:
        ctx = self._pctx
        assert ctx is not None
        ctx._ts = timer.timestamp
        ctx._domain = TimeDomain.EVENT_TIME
        self.collect_all(self.function.on_timer(timer.timestamp, ctx), timer.timestamp)

    def on_processing_time(self, timer: InternalTimer) -> None:
        ctx = self._pctx
        assert ctx is not None
        ctx._ts = timer.timestamp
        ctx._domain = TimeDomain.PROCESSING_TIME
        self.collect_all(self.function.on_timer(timer.timestamp, ctx), None)


class KeyedProcessOperator(AbstractKeyedProcessOperator):
    """Per record: set the current key, process_element; timers call on_timer."""

    context_type = KeyedProcessContext

    def __init__(self, key_selector: Any, function: KeyedProcessFunction) -> None:
        super().__init__(function)
        self.key_selector = key_selector
        self._key = KeyExtractor(key_selector)

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        self._process_keyed(batch, self._key, self.function.process_element)
