"""DataGeneratorSource and NumberSequenceSource (Flink's flink-connector-datagen).

Deterministic and parallel: the index space [0, count) is cut into chunks of `batch_size`;
chunk k belongs to subtask k % parallelism. Every subtask walks its chunks in increasing order, so
all subtasks advance through the index space (and hence through generated event time) together,
and a restarted subtask regenerates exactly the same records.

The position is state. A split is a tuple `(next, end, chunk, stride)` of ints: the indices i in
[next, end) whose chunk `i // chunk` is congruent to `next // chunk` modulo `stride`, emitted
chunk by chunk in increasing order (`next` may sit inside a chunk: the rest of a chunk that was
emitted in part). On a fresh start subtask s of p holds the one split `(s*batch_size, count,
batch_size, p)`. A snapshot cuts each split into finer stripes (stride >= min(max_parallelism,
1024)), so a restore at another parallelism deals the remaining work out evenly, and every new
subtask still walks forward through the whole remaining index space. A subtask always emits the
lowest next chunk among its splits, so its records stay in increasing index order after any
restore (monotonous event time stays monotonous per subtask).

Rate limiting (`rate_limiter_strategy=RateLimiterStrategy.per_second(r)`): r records per second
over all subtasks; a batch is then about 10 ms worth of records (at least 1), and a subtask that
is ahead of its budget returns NOTHING_AVAILABLE instead of sleeping. The records and their
values are the same with or without a rate; only the batch boundaries differ.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.api.connectors.base import RateLimiter, RateLimiterStrategy, Source, SplitSourceOperator
from runtime.api.operators.base import InputStatus
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, ObjectBatch, RecordBatch, Watermark

DEFAULT_BATCH_SIZE = 8192
# a snapshot refines splits to at least this stride (capped by max_parallelism): the number of
# split items of a whole checkpoint stays about this large, whatever the count
MAX_SNAPSHOT_STRIDE = 1024

GeneratorSplit = tuple[int, int, int, int]  # (next, end, chunk, stride)


def initial_split(count: int, batch_size: int, subtask: int, parallelism: int) -> list[GeneratorSplit]:
    """Subtask `subtask`'s splits on a fresh start: chunks subtask, subtask+p, ... (none if count is small)."""
    start = subtask * batch_size
    return [(start, count, batch_size, parallelism)] if start < count else []


def refine_split(split: GeneratorSplit, min_stride: int) -> list[GeneratorSplit]:
    """`split` as `m` disjoint stripes of stride m*stride >= min_stride (the first keeps `next`)."""
    nxt, end, chunk, stride = split
    if stride >= min_stride or nxt >= end:
        return [split] if nxt < end else []
    m = -(-min_stride // stride)
    first_chunk_start = nxt - nxt % chunk
    out = [(nxt, end, chunk, m * stride)]
    for j in range(1, m):
        start = first_chunk_start + j * stride * chunk
        if start >= end:
            break
        out.append((start, end, chunk, m * stride))
    return out


def split_indices(split: GeneratorSplit) -> list[int]:
    """Every index of a split, in emission order (for tests and debugging; materialises them)."""
    nxt, end, chunk, stride = split
    out: list[int] = []
    while nxt < end:
        cell_start = nxt - nxt % chunk
        cell_end = min(end, cell_start + chunk)
        out.extend(range(nxt, cell_end))
        nxt = cell_start + stride * chunk
    return out


def _valid_split(x: Any) -> bool:
    return (
        isinstance(x, (tuple, list))
        and len(x) == 4
        and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in x)
        and x[0] >= 0
        and x[2] >= 1
        and x[3] >= 1
    )


class DataGeneratorSourceOperator(SplitSourceOperator):
    def __init__(self, source: DataGeneratorSource) -> None:
        super().__init__()
        self.source = source
        self._heap: list[GeneratorSplit] = []  # ordered by next index
        self._limiter: RateLimiter | None = None

    # splits ------------------------------------------------------------------------------------
    def initial_splits(self) -> list[GeneratorSplit]:
        assert self.ctx is not None
        s = self.source
        return initial_split(s.count, s.batch_size, self.ctx.subtask_index, self.ctx.parallelism)

    def add_splits(self, splits: list[Any]) -> None:
        for x in splits:
            if not _valid_split(x):
                raise InvalidProgramError(
                    f"{self.describe()}: restored split {x!r} is not a DataGeneratorSource split (next, end, chunk, stride); "
                    "the checkpoint belongs to another source under the same uid: give this source its own uid or start without the checkpoint"
                )
            nxt, end, chunk, stride = (int(v) for v in x)
            if nxt < end:
                heapq.heappush(self._heap, (nxt, end, chunk, stride))

    def snapshot_splits(self) -> list[GeneratorSplit]:
        assert self.ctx is not None
        target = max(1, min(self.ctx.max_parallelism, MAX_SNAPSHOT_STRIDE))
        return [piece for split in sorted(self._heap) for piece in refine_split(split, target)]

    # lifecycle ---------------------------------------------------------------------------------
    def open(self) -> None:
        assert self.ctx is not None
        s = self.source
        super().open()
        if s.rate_limiter_strategy is not None:
            self._limiter = s.rate_limiter_strategy.create_rate_limiter(self.ctx.parallelism)
        for fn in (s.generator_function, s.batch_generator):
            if fn is not None and hasattr(fn, "open"):
                from runtime.api.operators.runtime_context import StreamingRuntimeContext

                fn.open(StreamingRuntimeContext(self.ctx, None))

    def emit_next(self) -> InputStatus:
        assert self.output is not None
        heap = self._heap
        if not heap:
            return self._end()
        nxt, end, chunk, stride = heap[0]
        chunk_start = nxt - nxt % chunk
        chunk_end = min(end, chunk_start + chunk)
        n = chunk_end - nxt
        limiter = self._limiter
        if limiter is not None:
            n = min(n, limiter.batch_size)
            if not limiter.try_acquire(n):
                return InputStatus.NOTHING_AVAILABLE  # ahead of the budget: the task sleeps briefly, never we
        self.output.emit(self.source.generate(nxt, nxt + n))
        nxt += n
        if nxt >= chunk_end:
            nxt = chunk_start + stride * chunk
        if nxt >= end:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (nxt, end, chunk, stride))
        return InputStatus.MORE_AVAILABLE if heap else self._end()

    def _end(self) -> InputStatus:
        assert self.output is not None
        self.output.emit_watermark(Watermark(MAX_TIMESTAMP))
        return InputStatus.END_OF_INPUT


class DataGeneratorSource(Source):
    """`DataGeneratorSource(generator_function, count, type_info=None, rate_limiter_strategy=None,
    batch_generator=None, batch_size=8192)`.

    Per-record path: `generator_function(index) -> record` (PyFlink/Flink's GeneratorFunction;
    an object with a `map(index)` method works too). Batch path (used when given):
    `batch_generator(np.ndarray of int64 indices) -> dict[str, np.ndarray]`, emitted as a
    ColumnBatch without any per-record Python call; it must compute each record from its index
    alone (batches are cut differently with a rate or after a restore).
    `rate_limiter_strategy`: e.g. `RateLimiterStrategy.per_second(1000)`, over all subtasks.
    """

    def __init__(
        self,
        generator_function: Callable[[int], Any] | Any = None,
        count: int = 0,
        type_info: Any = None,
        rate_limiter_strategy: RateLimiterStrategy | None = None,
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
        if rate_limiter_strategy is not None and not isinstance(rate_limiter_strategy, RateLimiterStrategy):
            raise InvalidProgramError(
                "DataGeneratorSource: rate_limiter_strategy must be a RateLimiterStrategy (e.g. RateLimiterStrategy.per_second(1000)), "
                f"got {type(rate_limiter_strategy).__name__}; pass batch_generator by keyword"
            )
        self.generator_function = generator_function
        self.count = int(count)
        self.type_info = type_info
        self.rate_limiter_strategy = rate_limiter_strategy
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
        super().__init__(self._value, end - start + 1, batch_size=batch_size)

    def _value(self, index: int) -> int:
        return self.start + index

    def generate(self, start: int, end: int) -> RecordBatch:
        # vectorized even on the per-record path: the values are plain ints
        return ObjectBatch((np.arange(start, end, dtype=np.int64) + self.start).tolist())


__all__ = [
    "DataGeneratorSource", "DataGeneratorSourceOperator", "NumberSequenceSource", "RateLimiter", "RateLimiterStrategy",
    "initial_split", "refine_split", "split_indices",
]
