"""KeyedStream.reduce(f). Port of Flink's StreamGroupedReduceOperator (streaming semantics).

Per element: new = reduce(previous, value) (the first element of a key passes through as is),
the running result is stored in keyed state and emitted with the element's timestamp.
"""
from __future__ import annotations

from typing import Any, Callable

from runtime.api.datastream.state import ValueStateDescriptor
from runtime.api.operators.runtime_context import AbstractKeyedOperator, close_function, open_function
from runtime.core.keys import KeyExtractor
from runtime.core.records import RecordBatch

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

    def open(self) -> None:
        assert self.keyed_state_backend is not None and self.runtime_context is not None
        self._state = self.keyed_state_backend.get_partitioned_state(ValueStateDescriptor(STATE_NAME))
        open_function(self.reduce_function, self.runtime_context)

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
        for i, value in enumerate(rows):
            if kgs is not None:
                backend.set_current_key_and_group(keys[i], kgs[i])
            else:
                backend.set_current_key(keys[i])
            cur = state.value()
            new = value if cur is None else reduce(cur, value)
            state.update(new)
            out.append(new)
        # one output per input record, so the input timestamps carry over unchanged
        self._out_values = out
        self._out_ts = [None] * len(out) if batch.timestamps is None else batch.timestamps.tolist()
        self.flush_output()
