"""KeyedStream.reduce(f) (and sum/min/max...). Port of Flink's StreamGroupedReduceOperator and,
in BATCH mode, BatchGroupedReduceOperator.

Per element: new = reduce(previous, value) (the first element of a key passes through as is),
the running result is stored in keyed state. Streaming: each running result is emitted with the
element's timestamp. Batch: nothing per element; every key's final result is emitted once its
input has ended (when the end-of-input watermark arrives, before it is forwarded, as Flink's
timer at Long.MAX_VALUE does), so a batch run's output is the streaming run's final values.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.api.datastream.state import ValueStateDescriptor
from runtime.api.operators.runtime_context import AbstractKeyedOperator, close_function, open_function
from runtime.core.execution_modes import RuntimeExecutionMode
from runtime.core.keys import KeyExtractor
from runtime.core.options import execution as execution_options
from runtime.core.records import MAX_TIMESTAMP, RecordBatch
from runtime.state.backend import KvValueState

STATE_NAME = "_op_state"  # Flink's StreamGroupedReduceOperator.STATE_NAME


def reduce_callable(fn: Any) -> Callable[[Any, Any], Any]:
    if hasattr(fn, "reduce") and callable(fn.reduce):
        return fn.reduce
    if callable(fn):
        return fn
    raise TypeError(f"reduce function must be a ReduceFunction or a callable, not {type(fn).__name__}")


class KeyedReduceOperator(AbstractKeyedOperator):
    def __init__(self, key_selector: Any, reduce_function: Any) -> None:
        super().__init__()
        self.key_selector = key_selector
        self.reduce_function = reduce_function
        self._reduce = reduce_callable(reduce_function)
        self._key = KeyExtractor(key_selector)
        self._state: Any = None
        self._batch = False
        self._emitted_final = False

    def open(self) -> None:
        assert self.keyed_state_backend is not None and self.runtime_context is not None
        self._state = self.keyed_state_backend.get_partitioned_state(ValueStateDescriptor(STATE_NAME))
        assert self.ctx is not None
        self._batch = execution_options.RUNTIME_MODE.get(self.ctx.config) is RuntimeExecutionMode.BATCH
        open_function(self.reduce_function, self.runtime_context)

    def on_watermark(self, timestamp: int) -> None:
        if self._batch and timestamp >= MAX_TIMESTAMP:
            self._emit_final()
        super().on_watermark(timestamp)

    def finish(self) -> None:
        if self._batch:
            self._emit_final()  # an input without watermarks
        super().finish()

    def _emit_final(self) -> None:
        if self._emitted_final:
            return
        self._emitted_final = True
        backend = self.keyed_state_backend
        assert backend is not None
        out: list[Any] = []
        for key in list(backend.get_keys(STATE_NAME)):
            backend.set_current_key(key)
            out.append(self._state.value())
        self._out_values = out
        self._out_ts = [MAX_TIMESTAMP] * len(out)
        self.flush_output()

    def close(self) -> None:
        try:
            close_function(self.reduce_function)
        finally:
            super().close()

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        backend = self.keyed_state_backend
        assert backend is not None
        keys, kgs = self._keys_and_groups(self._key, batch)
        rows = batch.rows()
        state, reduce = self._state, self._reduce
        out: list[Any] = []
        if kgs is not None and type(state) is KvValueState:
            # key groups known for the batch: state by explicit (key group, key), no per-record key switch
            backend.check_key_groups(keys, kgs)
            get, update, ns = state.raw_at, state.update_at, state.namespace
            for value, key, kg in zip(rows, keys, kgs):
                backend._current_key, backend._current_kg = key, kg  # the reduce function's own state
                cur = get(kg, key, ns)
                new = value if cur is None else reduce(cur, value)
                update(kg, key, ns, new)
                out.append(new)
        else:
            for i, value in enumerate(rows):
                if kgs is not None:
                    backend.set_current_key_and_group(keys[i], kgs[i])
                else:
                    backend.set_current_key(keys[i])
                cur = state.value()
                new = value if cur is None else reduce(cur, value)
                state.update(new)
                out.append(new)
        if self._batch:
            return  # final values only, at the end
        # one output per input record, so the input timestamps carry over unchanged
        self._out_values = out
        self._out_ts = [None] * len(out) if batch.timestamps is None else batch.timestamps.tolist()
        self.flush_output()
