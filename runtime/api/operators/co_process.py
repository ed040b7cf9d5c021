"""ConnectedStreams(keyed).process(KeyedCoProcessFunction). Port of Flink's KeyedCoProcessOperator.

Two inputs share one keyed state backend and one timer service: input 0 is keyed with
key_selector1 and goes to process_element1, input 1 with key_selector2 to process_element2.
"""
from __future__ import annotations

from typing import Any

from runtime.api.datastream.functions import KeyedCoProcessFunction
from runtime.api.operators.keyed_process import AbstractKeyedProcessOperator, KeyedTimerContext
from runtime.core.keys import KeyExtractor
from runtime.core.records import RecordBatch


class KeyedCoProcessContext(KeyedTimerContext, KeyedCoProcessFunction.OnTimerContext):
    __slots__ = ()


class KeyedCoProcessOperator(AbstractKeyedProcessOperator):
    num_inputs = 2
    context_type = KeyedCoProcessContext

    def __init__(self, key_selector1: Any, key_selector2: Any, function: KeyedCoProcessFunction) -> None:
        super().__init__(function)
        self.key_selector1 = key_selector1
        self.key_selector2 = key_selector2
        self._keys = (KeyExtractor(key_selector1), KeyExtractor(key_selector2))

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if input_index not in (0, 1):
            raise ValueError(f"KeyedCoProcessOperator has inputs 0 and 1, not {input_index}")
        process = self.function.process_element1 if input_index == 0 else self.function.process_element2
        self._process_keyed(batch, self._keys[input_index], process)
