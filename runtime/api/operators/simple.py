"""Stateless operators behind DataStream.map / flat_map / filter / process / map_batches /
connect().map... and assign_timestamps_and_watermarks.

Per-record operators loop over a batch, call the user function, and emit ONE output batch per
input batch (never per record); each output keeps the timestamp of the input it came from.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from runtime.api.datastream.functions import (
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    MapFunction,
    OutputTag,
    ProcessFunction,
    TimerService,
)
from runtime.api.operators.base import StreamOperator
from runtime.api.operators.runtime_context import emit_objects
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.core.options import execution as execution_options
from runtime.core.records import ACTIVE, IDLE, MAX_TIMESTAMP, MIN_TIMESTAMP, ColumnBatch, ObjectBatch, RecordBatch, Watermark
from runtime.core.row import named_row_columns


def _open_function(op: StreamOperator, fn: Any) -> None:
    """Call a rich function's open(runtime_context) (plain callables have none)."""
    if isinstance(fn, Function):
        from runtime.api.operators.runtime_context import StreamingRuntimeContext

        assert op.ctx is not None
        fn.open(StreamingRuntimeContext(op.ctx, None))


def _close_function(fn: Any) -> None:
    if isinstance(fn, Function):
        fn.close()


class _FunctionOperator(StreamOperator):
    """An operator wrapping one user function (a Function object or a plain callable)."""

    def __init__(self, function: Any) -> None:
        super().__init__()
        self.function = function

    def open(self) -> None:
        _open_function(self, self.function)

    def close(self) -> None:
        _close_function(self.function)

    def _emit(self, values: list[Any], timestamps: list[int] | None) -> None:
        if values:
            assert self.output is not None
            ts = None if timestamps is None else np.asarray(timestamps, dtype=np.int64)
            self.output.emit(ObjectBatch(values, ts))

    def _map_batch(self, fn: Callable[[Any], Any], batch: RecordBatch) -> None:
        """One output per record: fn(value)."""
        # same count in and out: timestamps carry over unchanged
        out = [fn(v) for v in batch.rows()]
        if out:
            assert self.output is not None
            self.output.emit(ObjectBatch(out, batch.timestamps))

    def _flat_map_batch(self, fn: Callable[[Any], Iterable[Any] | None], batch: RecordBatch) -> None:
        """Any number of outputs per record: what fn(value) returns or yields."""
        values: list[Any] = []
        stamps: list[int] | None = None if batch.timestamps is None else []
        for v, ts in batch.records_with_timestamps():
            _flat_collect(fn(v), ts, values, stamps)
        self._emit(values, stamps)


def _flat_collect(results: Iterable[Any] | None, ts: int | None, values: list[Any], stamps: list[int] | None) -> None:
    if results is None:
        return
    for r in results:
        values.append(r)
        if stamps is not None:
            stamps.append(ts)  # type: ignore[arg-type]  # stamps is a list only for a batch with timestamps: ts is an int


class StreamMap(_FunctionOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        fn: Callable[[Any], Any] = self.function.map if isinstance(self.function, MapFunction) else self.function
        self._map_batch(fn, batch)


class StreamFlatMap(_FunctionOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        fn = self.function.flat_map if isinstance(self.function, FlatMapFunction) else self.function
        self._flat_map_batch(fn, batch)


class StreamFilter(_FunctionOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        fn = self.function.filter if isinstance(self.function, FilterFunction) else self.function
        mask = np.fromiter((bool(fn(v)) for v in batch.rows()), dtype=bool, count=len(batch))
        if mask.all():
            out = batch
        elif not mask.any():
            return
        else:
            out = batch.take(np.flatnonzero(mask))  # keeps a ColumnBatch columnar
        assert self.output is not None
        self.output.emit(out)


class _NonKeyedTimerService(TimerService):
    """Timers need keyed state in Flink; a non-keyed process function may only read time."""

    def __init__(self, op: StreamOperator) -> None:
        self._op = op

    def current_processing_time(self) -> int:
        assert self._op.ctx is not None
        return self._op.ctx.processing_time_service.current_processing_time()

    def current_watermark(self) -> int:
        return self._op.current_watermark

    def _refuse(self) -> None:
        name = self._op.ctx.operator_name if self._op.ctx is not None else type(self._op).__name__
        raise InvalidProgramError(
            f"operator '{name}': setting timers is only supported on keyed streams; "
            "use key_by(...).process(KeyedProcessFunction)"
        )

    def register_processing_time_timer(self, timestamp: int) -> None:
        self._refuse()

    def register_event_time_timer(self, timestamp: int) -> None:
        self._refuse()

    def delete_processing_time_timer(self, timestamp: int) -> None:
        self._refuse()

    def delete_event_time_timer(self, timestamp: int) -> None:
        self._refuse()


class _ProcessContext(ProcessFunction.Context, CoProcessFunction.Context):
    __slots__ = ("_ts", "_timer_service", "_sides")

    def __init__(self, timer_service: TimerService) -> None:
        self._ts: int | None = None
        self._timer_service = timer_service
        self._sides: dict[str, tuple[list[Any], list[int | None]]] = {}  # side outputs of the batch in hand

    def output(self, output_tag: Any, value: Any) -> None:
        values, stamps = self._sides.setdefault(output_tag.tag_id, ([], []))
        values.append(value)
        stamps.append(self._ts)

    def timestamp(self) -> int | None:
        return self._ts

    def timer_service(self) -> TimerService:
        return self._timer_service


class _ProcessFunctionOperator(_FunctionOperator):
    """Runs a non-keyed (Co)ProcessFunction: ctx.timestamp() works, timers are refused (like Flink)."""

    def open(self) -> None:
        self._pctx = _ProcessContext(_NonKeyedTimerService(self))
        super().open()

    def _process_batch_with(self, fn: Callable[[Any, Any], Iterable[Any] | None], batch: RecordBatch) -> None:
        """Per record: fn(value, ctx) with ctx.timestamp() = the record's timestamp."""
        pctx = self._pctx
        values: list[Any] = []
        stamps: list[int] | None = None if batch.timestamps is None else []
        for v, ts in batch.records_with_timestamps():
            pctx._ts = ts
            results = fn(v, pctx)
            if results is None:
                continue
            for r in results:
                if type(r) is tuple and len(r) == 2 and isinstance(r[0], OutputTag):  # PyFlink: yield tag, value
                    pctx.output(r[0], r[1])
                    continue
                values.append(r)
                if stamps is not None:
                    stamps.append(ts)  # type: ignore[arg-type]  # a list only for a batch with timestamps: ts is an int
        self._emit(values, stamps)
        if pctx._sides:
            sides, pctx._sides = pctx._sides, {}
            assert self.output is not None
            output = self.output
            for tag_id, (vals, tss) in sides.items():
                emit_objects(functools.partial(output.emit_side, tag_id), vals, tss)


class ProcessOperator(_ProcessFunctionOperator):
    """Non-keyed ProcessFunction: ctx.timestamp() works, timers are refused (like Flink)."""

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        fn = self.function.process_element if isinstance(self.function, ProcessFunction) else self.function
        self._process_batch_with(fn, batch)


# -- vectorized ----------------------------------------------------------------------------------

BATCH_FORMATS = ("numpy", "pyarrow", "pandas")


def _batch_to_columns(batch: RecordBatch) -> dict[str, np.ndarray]:
    if isinstance(batch, ColumnBatch):
        return dict(batch.columns)
    rows = batch.rows()
    named = named_row_columns(rows)
    if named is not None:  # same-named Rows: transposed in C
        return {n: np.asarray(c) for n, c in named.items()}
    first = rows[0]
    if isinstance(first, dict):
        names = list(first)
        return {n: np.asarray([r[n] for r in rows]) for n in names}
    names_t = getattr(first, "field_names", None)
    if names_t is None:
        raise InvalidProgramError(
            "map_batches(): records must be named Rows or dicts to become columns; "
            f"got {type(first).__name__} (declare Types.ROW_NAMED or emit Row(name=...) upstream)"
        )
    cols = list(zip(*(list(r) for r in rows)))
    return {n: np.asarray(c) for n, c in zip(names_t, cols)}


def _columns_from_result(result: Any) -> dict[str, np.ndarray]:
    import pyarrow as pa

    if isinstance(result, dict):
        return {k: np.asarray(v) for k, v in result.items()}
    if isinstance(result, (pa.RecordBatch, pa.Table)):
        return {name: result.column(i).to_numpy(zero_copy_only=False) for i, name in enumerate(result.schema.names)}
    if hasattr(result, "to_dict") and hasattr(result, "columns"):  # pandas DataFrame
        return {str(c): result[c].to_numpy() for c in result.columns}
    raise InvalidProgramError(
        f"map_batches(): the function must return a dict of arrays, a pyarrow RecordBatch/Table or a "
        f"pandas DataFrame, got {type(result).__name__}"
    )


class MapBatchesOperator(_FunctionOperator):
    """The vectorized path: fn(batch) -> batch of the same kind, no per-record Python call.

    Timestamps carry over when the row count is unchanged; otherwise they are dropped.
    """

    def __init__(self, function: Callable[[Any], Any], batch_format: str = "numpy") -> None:
        super().__init__(function)
        if batch_format not in BATCH_FORMATS:
            raise InvalidProgramError(f"map_batches(): batch_format must be one of {BATCH_FORMATS}, got {batch_format!r}")
        self.batch_format = batch_format

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if len(batch) == 0:
            return
        cols = _batch_to_columns(batch)
        if self.batch_format == "numpy":
            arg: Any = cols
        else:
            import pyarrow as pa

            arg = pa.RecordBatch.from_pydict({k: pa.array(v) for k, v in cols.items()})
            if self.batch_format == "pandas":
                arg = arg.to_pandas()
        fn = self.function.map if isinstance(self.function, MapFunction) else self.function
        result = fn(arg)
        if result is None:
            return
        out_cols = _columns_from_result(result)
        out = ColumnBatch(out_cols)
        if len(out) == 0:
            return
        if batch.timestamps is not None and len(out) == len(batch):
            out.timestamps = batch.timestamps
        assert self.output is not None
        self.output.emit(out)


# -- two inputs ------------------------------------------------------------------------------------


class _TwoInputFunctionOperator(_FunctionOperator):
    num_inputs = 2


class CoStreamMap(_TwoInputFunctionOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        f: CoMapFunction = self.function
        self._map_batch(f.map1 if input_index == 0 else f.map2, batch)


class CoStreamFlatMap(_TwoInputFunctionOperator):
    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        f: CoFlatMapFunction = self.function
        self._flat_map_batch(f.flat_map1 if input_index == 0 else f.flat_map2, batch)


class CoProcessOperator(_ProcessFunctionOperator):
    """Non-keyed CoProcessFunction (timers refused, like Flink's CoProcessOperator)."""

    num_inputs = 2

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        f: CoProcessFunction = self.function
        self._process_batch_with(f.process_element1 if input_index == 0 else f.process_element2, batch)


# -- event time ------------------------------------------------------------------------------------


WATERMARK_INTERVAL_KEY = execution_options.AUTO_WATERMARK_INTERVAL.key  # the option's key under its old name
DEFAULT_WATERMARK_INTERVAL_MS = execution_options.AUTO_WATERMARK_INTERVAL.default  # Flink's default


def auto_watermark_interval_ms(config: Mapping[str, str]) -> int:
    """The job's pipeline.auto-watermark-interval in ms ("200", "200 ms", "0")."""
    try:
        return execution_options.AUTO_WATERMARK_INTERVAL.get(config)
    except ConfigurationError as e:  # the program's watermark strategy cannot run: fail it as a program error
        raise InvalidProgramError(str(e)) from None


class TimestampsAndWatermarksOperator(StreamOperator):
    """Flink's TimestampsAndWatermarksOperator: assign timestamps, generate watermarks.

    Bounded out-of-orderness (Flink's BoundedOutOfOrdernessWatermarks): watermark =
    max_timestamp - delay - 1, emitted periodically as in Flink: every
    `pipeline.auto-watermark-interval` (200 ms by default; processing time, a timer on the task
    thread) when it advanced. Millrace's one deviation: an interval of 0 (Flink: no periodic
    watermarks, so none until the end) emits it after each input batch instead -- never later than
    a periodic one would be, and which records are late then depends on the batches, not on timing.
    Upstream watermarks are ignored except the final MAX one; at end of input a MAX watermark is
    emitted (Flink's sources do that at the end of bounded input).
    """

    def __init__(self, strategy: Any) -> None:
        super().__init__()
        self.strategy = strategy
        self._max_ts = MIN_TIMESTAMP
        self._emitted = MIN_TIMESTAMP
        self._idle = False
        self._last_activity_ms = 0
        self._interval_ms = 0  # 0: a watermark after each batch

    def open(self) -> None:
        assert self.ctx is not None
        self._interval_ms = auto_watermark_interval_ms(self.ctx.config)
        if self._interval_ms > 0 and self.strategy.generates_watermarks:
            self.ctx.processing_time_service.register_timer(self._now_ms() + self._interval_ms, self._on_periodic_emit)
        idle_ms = getattr(self.strategy, "idleness_ms", None)
        if idle_ms:  # with_idleness: no records for that long (processing time) marks this output idle
            self._last_activity_ms = self._now_ms()
            self._check_idle_at(self._last_activity_ms + idle_ms)

    def _now_ms(self) -> int:
        assert self.ctx is not None
        return int(self.ctx.processing_time_service.current_processing_time())

    def _check_idle_at(self, at_ms: int) -> None:
        assert self.ctx is not None
        self.ctx.processing_time_service.register_timer(at_ms, self._check_idle)

    def _check_idle(self, _timestamp: int) -> None:
        """Flink's WatermarksWithIdleness: idle once no record came for the idle timeout."""
        if self._emitted == MAX_TIMESTAMP or self._idle:
            return  # ended, or already idle (a record makes it active and checks again)
        idle_ms = self.strategy.idleness_ms
        now = self._now_ms()
        if now - self._last_activity_ms >= idle_ms:
            self._idle = True
            assert self.output is not None
            self.output.emit_watermark_status(IDLE)
        else:
            self._check_idle_at(self._last_activity_ms + idle_ms)

    def process_watermark_status(self, status: Any, input_index: int = 0) -> None:
        pass  # this operator decides its output's idleness itself (upstream statuses are replaced)

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        if len(batch) == 0:
            return
        if self.strategy.idleness_ms:
            self._last_activity_ms = self._now_ms()
            if self._idle:  # records again: active before them
                self._idle = False
                assert self.output is not None
                self.output.emit_watermark_status(ACTIVE)
                self._check_idle_at(self._last_activity_ms + self.strategy.idleness_ms)
        assigner = self.strategy.timestamp_assigner
        if assigner is not None:
            ts = assigner.extract_timestamps(batch)
            batch = _with_timestamps(batch, ts)
        else:
            ts = batch.timestamps  # Flink's RecordTimestampAssigner: keep what the source gave
        assert self.output is not None
        self.output.emit(batch)
        if ts is not None and self.strategy.generates_watermarks:
            m = int(ts.max())
            if m > self._max_ts:
                self._max_ts = m
            if self._interval_ms == 0:
                self._emit_progress()

    def _emit_progress(self) -> None:
        """Flink's onPeriodicEmit: the watermark for the largest timestamp so far, if it advanced."""
        wm = self._max_ts - self.strategy.max_out_of_orderness_ms - 1
        if wm > self._emitted and self._max_ts > MIN_TIMESTAMP:
            self._emitted = wm
            assert self.output is not None
            self.output.emit_watermark(Watermark(wm))

    def _on_periodic_emit(self, _timestamp: int) -> None:
        if self._emitted == MAX_TIMESTAMP:
            return  # ended: no more timers
        self._emit_progress()
        assert self.ctx is not None
        self.ctx.processing_time_service.register_timer(self._now_ms() + self._interval_ms, self._on_periodic_emit)

    def process_watermark(self, watermark: Watermark, input_index: int = 0) -> None:
        # upstream watermarks are replaced by ours; only end-of-time passes (like Flink)
        if watermark.timestamp == MAX_TIMESTAMP:
            self._emit_max()

    def end_input(self, input_index: int = 0) -> None:
        self._emit_max()

    def _emit_max(self) -> None:
        if self._emitted != MAX_TIMESTAMP:
            self._emitted = MAX_TIMESTAMP
            self._current_watermark = MAX_TIMESTAMP
            assert self.output is not None
            self.output.emit_watermark(Watermark(MAX_TIMESTAMP))


def _with_timestamps(batch: RecordBatch, ts: np.ndarray) -> RecordBatch:
    if isinstance(batch, ColumnBatch):
        return ColumnBatch(batch.columns, ts)
    return ObjectBatch(batch.rows(), ts)


class SinkFunctionOperator(_FunctionOperator):
    """DataStream.add_sink(SinkFunction or callable): invoke per record."""

    def process_batch(self, batch: RecordBatch, input_index: int = 0) -> None:
        f = self.function
        if hasattr(f, "invoke"):
            for v in batch.rows():
                f.invoke(v, None)
        else:
            for v in batch.rows():
                f(v)
