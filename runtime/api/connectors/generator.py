"""DataGeneratorSource and NumberSequenceSource (Flink's flink-connector-datagen), on FLIP-27.

Deterministic and parallel: the index space [0, count) is cut into chunks of `batch_size`;
chunk k belongs to split k % parallelism. Every reader walks its chunks in increasing order, so
all subtasks advance through the index space (and hence through generated event time) together,
and a restarted subtask regenerates exactly the same records.

A split (`GeneratorSplit(next, end, chunk, stride)`) is the indices i in [next, end) whose chunk
`i // chunk` is congruent to `next // chunk` modulo `stride`, emitted chunk by chunk in increasing
order (`next` may sit inside a chunk: the rest of a chunk that was emitted in part). The
enumerator (on the JobMaster) starts with one split per subtask, `(s*batch_size, count,
batch_size, p)`, and gives subtask s its own split when it asks (`StaticSplitEnumerator`). A
reader's snapshot cuts each of its splits into finer stripes (stride >= min(max_parallelism,
1024)), so a restore at another parallelism deals the remaining work out evenly, and every new
subtask still walks forward through the whole remaining index space. A reader always emits the
lowest next chunk among its splits, so its records stay in increasing index order after any
restore (monotonous event time stays monotonous per subtask): one watermark follows its output.

Rate limiting (`rate_limiter_strategy=RateLimiterStrategy.per_second(r)`): r records per second
over all subtasks; a batch is then about 10 ms worth of records (at least 1), and a reader that
is ahead of its budget returns NOTHING_AVAILABLE instead of sleeping. The records and their
values are the same with or without a rate; only the batch boundaries differ.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from runtime.api.connectors.base import RateLimiter, RateLimiterStrategy, Source
from runtime.api.connectors.source.api import ReaderOutput, SourceReader, SourceReaderContext, SplitEnumeratorContext
from runtime.api.connectors.source.enumerators import StaticSplitEnumerator, restored_splits
from runtime.core.errors import InvalidProgramError
from runtime.core.operators import InputStatus
from runtime.core.records import ColumnBatch, ObjectBatch, RecordBatch

DEFAULT_BATCH_SIZE = 8192
# a snapshot refines splits to at least this stride (capped by max_parallelism): the number of
# split items of a whole checkpoint stays about this large, whatever the count
MAX_SNAPSHOT_STRIDE = 1024


class GeneratorSplit(NamedTuple):
    next: int
    end: int
    chunk: int
    stride: int

    @property
    def split_id(self) -> str:
        # the stripe's residue class and stride: stable while `next` advances, unique among disjoint stripes
        return f"{(self.next // self.chunk) % self.stride}/{self.stride}"


def initial_split(count: int, batch_size: int, subtask: int, parallelism: int) -> list[GeneratorSplit]:
    """Subtask `subtask`'s split on a fresh start: chunks subtask, subtask+p, ... (none if count is small)."""
    start = subtask * batch_size
    return [GeneratorSplit(start, count, batch_size, parallelism)] if start < count else []


def refine_split(split: tuple[int, int, int, int], min_stride: int) -> list[GeneratorSplit]:
    """`split` as `m` disjoint stripes of stride m*stride >= min_stride (the first keeps `next`)."""
    nxt, end, chunk, stride = split
    if stride >= min_stride or nxt >= end:
        return [GeneratorSplit(*split)] if nxt < end else []
    m = -(-min_stride // stride)
    first_chunk_start = nxt - nxt % chunk
    out = [GeneratorSplit(nxt, end, chunk, m * stride)]
    for j in range(1, m):
        start = first_chunk_start + j * stride * chunk
        if start >= end:
            break
        out.append(GeneratorSplit(start, end, chunk, m * stride))
    return out


def split_indices(split: tuple[int, int, int, int]) -> list[int]:
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


def _as_split(x: Any, source_name: str) -> GeneratorSplit:
    if not _valid_split(x):
        raise InvalidProgramError(
            f"{source_name}: restored split {x!r} is not a DataGeneratorSource split (next, end, chunk, stride); "
            "the checkpoint belongs to another source under the same uid: give this source its own uid or start without the checkpoint"
        )
    return GeneratorSplit(*(int(v) for v in x))


class GeneratorContext:
    """What a generator function's (or batch generator's) `open(context)` gets: the reader's
    context (Flink's GeneratorFunction.open(SourceReaderContext)), with RuntimeContext's getters."""

    def __init__(self, context: SourceReaderContext) -> None:
        self.reader_context = context

    def get_index_of_this_subtask(self) -> int:
        return self.reader_context.index_of_subtask

    def get_number_of_parallel_subtasks(self) -> int:
        return self.reader_context.current_parallelism

    def get_attempt_number(self) -> int:
        return self.reader_context.attempt_number

    @property
    def config(self) -> Mapping[str, str]:
        return self.reader_context.config


class DataGeneratorSourceReader(SourceReader[GeneratorSplit]):
    split_local_watermarks = False  # the reader emits its splits' chunks in index order itself

    def __init__(self, context: SourceReaderContext, source: DataGeneratorSource) -> None:
        self.context = context
        self.source = source
        self._heap: list[GeneratorSplit] = []  # ordered by next index
        self._limiter: RateLimiter | None = None
        self._no_more = False
        self._asked = False

    def add_splits(self, splits: list[GeneratorSplit]) -> None:
        for x in splits:
            split = _as_split(x, self.source.describe(self.context))
            if split.next < split.end:
                heapq.heappush(self._heap, split)
        self._asked = False

    def notify_no_more_splits(self) -> None:
        self._no_more = True

    def snapshot_state(self, checkpoint_id: int) -> list[GeneratorSplit]:
        target = max(1, min(self.context.max_parallelism, MAX_SNAPSHOT_STRIDE))
        return [piece for split in sorted(self._heap) for piece in refine_split(split, target)]

    def start(self) -> None:
        s = self.source
        if s.rate_limiter_strategy is not None:
            self._limiter = s.rate_limiter_strategy.create_rate_limiter(self.context.current_parallelism)
        for fn in (s.generator_function, s.batch_generator):
            if fn is not None and hasattr(fn, "open"):
                fn.open(GeneratorContext(self.context))
        if not self._heap:
            self._ask()

    def _ask(self) -> None:
        if not self._asked and not self._no_more:
            self._asked = True
            self.context.send_split_request()

    def poll_next(self, output: ReaderOutput) -> InputStatus:
        heap = self._heap
        if not heap:
            if self._no_more:
                return InputStatus.END_OF_INPUT
            self._ask()
            return InputStatus.NOTHING_AVAILABLE
        nxt, end, chunk, stride = heap[0]
        chunk_start = nxt - nxt % chunk
        chunk_end = min(end, chunk_start + chunk)
        n = chunk_end - nxt
        limiter = self._limiter
        if limiter is not None:
            n = min(n, limiter.batch_size)
            if not limiter.try_acquire(n):
                return InputStatus.NOTHING_AVAILABLE  # ahead of the budget: the task sleeps briefly, never we
        output.collect(self.source.generate(nxt, nxt + n))
        nxt += n
        if nxt >= chunk_end:
            nxt = chunk_start + stride * chunk
        if nxt >= end:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, GeneratorSplit(nxt, end, chunk, stride))
        if not heap:
            self._ask()  # more work may be left at the enumerator (a restore's, a failed reader's)
        return InputStatus.MORE_AVAILABLE


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

    # --- FLIP-27 -----------------------------------------------------------------------------------
    def create_enumerator(self, context: SplitEnumeratorContext[GeneratorSplit]) -> StaticSplitEnumerator[GeneratorSplit]:
        p = context.current_parallelism()
        splits = [split for s in range(p) for split in initial_split(self.count, self.batch_size, s, p)]
        return StaticSplitEnumerator(context, splits, owner=lambda split: (split.next // split.chunk) % split.stride if split.stride == p else None)

    def restore_enumerator(self, context: SplitEnumeratorContext[GeneratorSplit], checkpoint: Any) -> StaticSplitEnumerator[GeneratorSplit]:
        pending = restored_splits(checkpoint, type(self).__name__, _valid_split)
        return StaticSplitEnumerator(context, [GeneratorSplit(*(int(v) for v in x)) for x in pending])

    def create_reader(self, context: SourceReaderContext) -> DataGeneratorSourceReader:
        return DataGeneratorSourceReader(context, self)

    def describe(self, context: SourceReaderContext) -> str:
        """`DataGeneratorSource (subtask i/p)` for error messages."""
        return f"{type(self).__name__} (subtask {context.index_of_subtask + 1}/{context.current_parallelism})"

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
    "DataGeneratorSource", "DataGeneratorSourceReader", "GeneratorContext", "GeneratorSplit", "NumberSequenceSource", "RateLimiter",
    "RateLimiterStrategy", "initial_split", "refine_split", "split_indices",
]
