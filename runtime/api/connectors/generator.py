"""DataGeneratorSource and NumberSequenceSource (Flink's flink-connector-datagen).

Deterministic and parallel: the index space [0, count) is cut into chunks of `batch_size`;
chunk k belongs to subtask k % parallelism. Every subtask walks its chunks in increasing order, so
all subtasks advance through the index space (and hence through generated event time) together,
and a restarted subtask regenerates exactly the same records.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from runtime.api.connectors.base import Source
from runtime.api.operators.base import InputStatus, SourceOperator
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, ObjectBatch, RecordBatch, Watermark

DEFAULT_BATCH_SIZE = 8192


def chunks_of_subtask(count: int, batch_size: int, subtask: int, parallelism: int) -> list[tuple[int, int]]:
    """[start, end) index ranges of one subtask, in order."""
    n_chunks = (count + batch_size - 1) // batch_size
    return [(k * batch_size, min(count, (k + 1) * batch_size)) for k in range(subtask, n_chunks, parallelism)]


class DataGeneratorSourceOperator(SourceOperator):
    def __init__(self, source: "DataGeneratorSource") -> None:
        super().__init__()
        self.source = source
        self._chunks: list[tuple[int, int]] = []
        self._next = 0

    def open(self) -> None:
        assert self.ctx is not None
        s = self.source
        self._chunks = chunks_of_subtask(s.count, s.batch_size, self.ctx.subtask_index, self.ctx.parallelism)
        for fn in (s.generator_function, s.batch_generator):
            if fn is not None and hasattr(fn, "open"):
                from runtime.api.operators.runtime_context import StreamingRuntimeContext

                fn.open(StreamingRuntimeContext(self.ctx, None))

    def emit_next(self) -> InputStatus:
        assert self.output is not None
        if self._next >= len(self._chunks):
            self.output.emit_watermark(Watermark(MAX_TIMESTAMP))
            return InputStatus.END_OF_INPUT
        start, end = self._chunks[self._next]
        self._next += 1
        self.output.emit(self.source.generate(start, end))
        if self._next >= len(self._chunks):
            self.output.emit_watermark(Watermark(MAX_TIMESTAMP))
            return InputStatus.END_OF_INPUT
        return InputStatus.MORE_AVAILABLE


class DataGeneratorSource(Source):
    """`DataGeneratorSource(generator_function, count, type_info=None, batch_generator=None, batch_size=8192)`.

    Per-record path: `generator_function(index) -> record` (PyFlink/Flink's GeneratorFunction;
    an object with a `map(index)` method works too). Batch path (used when given):
    `batch_generator(np.ndarray of int64 indices) -> dict[str, np.ndarray]`, emitted as a
    ColumnBatch without any per-record Python call.
    """

    def __init__(
        self,
        generator_function: Callable[[int], Any] | Any = None,
        count: int = 0,
        type_info: Any = None,
        batch_generator: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
    ) -> None:
        if generator_function is None and batch_generator is None:
            raise InvalidProgramError("DataGeneratorSource: give a generator_function or a batch_generator")
        for what, fn in (("generator_function", generator_function), ("batch_generator", batch_generator)):
            if fn is not None and not (callable(fn) or hasattr(fn, "map")):
                raise InvalidProgramError(f"DataGeneratorSource: {what} must be callable, got {type(fn).__name__}")
        if count < 0 or batch_size < 1:
            raise InvalidProgramError(f"DataGeneratorSource: need count >= 0 and batch_size >= 1 (got {count}, {batch_size})")
        self.generator_function = generator_function
        self.count = int(count)
        self.type_info = type_info
        self.batch_generator = batch_generator
        self.batch_size = int(batch_size)

    def generate(self, start: int, end: int) -> RecordBatch:
        if self.batch_generator is not None:
            cols = self.batch_generator(np.arange(start, end, dtype=np.int64))
            return ColumnBatch({k: np.asarray(v) for k, v in cols.items()})
        fn = self.generator_function
        call = fn.map if not callable(fn) else fn
        return ObjectBatch([call(i) for i in range(start, end)])

    def create_operator(self) -> DataGeneratorSourceOperator:
        return DataGeneratorSourceOperator(self)

    def get_type_info(self) -> Any:
        return self.type_info


class NumberSequenceSource(DataGeneratorSource):
    """PyFlink's NumberSequenceSource(start, end): the longs start..end, both inclusive."""

    def __init__(self, start: int, end: int, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        if end < start:
            raise InvalidProgramError(f"NumberSequenceSource: end ({end}) < start ({start})")
        self.start = int(start)
        self.end = int(end)
        super().__init__(self._value, end - start + 1, None, None, batch_size)

    def _value(self, index: int) -> int:
        return self.start + index

    def generate(self, start: int, end: int) -> RecordBatch:
        # vectorized even on the per-record path: the values are plain ints
        return ObjectBatch((np.arange(start, end, dtype=np.int64) + self.start).tolist())
