"""ConnectedStreams(keyed).process(KeyedCoProcessFunction). Port of Flink's KeyedCoProcessOperator.

Two inputs share one keyed state backend and one timer service: input 0 is keyed with
key_selector1 and goes to process_element1, input 1 with key_selector2 to process_element2.
"""
from __future__ import annotations

from typing import Any

from runtime.api.datastream.functions import KeyedCoProcessFunction, TimeDomain, TimerService
from runtime.api.operators.keyed_process import USER_TIMERS, SimpleTimerService
from runtime.api.operators.runtime_context import AbstractKeyedOperator, close_function, open_function
from runtime.core.keys import KeyExtractor
from runtime.core.records import RecordBatch
from runtime.state.timers import InternalTimer


class KeyedCoProcessContext(KeyedCoProcessFunction.OnTimerContext):
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

    def time_domain(self) -> int:
        if self._domain is None:
            raise RuntimeError("time_domain() is only available in on_timer")
        return self._domain


class KeyedCoProcessOperator(AbstractKeyedOperator):
    num_inputs = 2

    def __init__(self, key_selector1: Any, key_selector2: Any, function: KeyedCoProcessFunction) -> None:
        super().__init__()
        self.key_selector1 = key_selector1
        self.key_selector2 = key_selector2
        self.function = function
        self._keys = (KeyExtractor(key_selector1), KeyExtractor(key_selector2))
        self._pctx: KeyedCoProcessContext | None = None

    def open(self) -> None:
        assert self.runtime_context is not None
        svc = self.get_internal_timer_service(USER_TIMERS, self)
        self._pctx = KeyedCoProcessContext(self, SimpleTimerService(svc))
        open_function(self.function, self.runtime_context)

    def close(self) -> None:
        try:
            close_function(self.function)
        finally:
            super().close()

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if input_index not in (0, 1):
            raise ValueError(f"KeyedCoProcessOperator has inputs 0 and 1, not {input_index}")
        backend = self.keyed_state_backend
        ctx = self._pctx
        assert backend is not None and ctx is not None
        keys, kgs = self._keys_and_groups(self._keys[input_index], batch)
        rows = batch.rows()
        tss = batch.timestamps.tolist() if batch.timestamps is not None else None
        process = self.function.process_element1 if input_index == 0 else self.function.process_element2
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
