"""WatermarkStrategy and TimestampAssigner, mirroring pyflink.common.watermark_strategy.

A strategy is pure configuration; runtime.api.operators.simple.TimestampsAndWatermarksOperator
does the work. Besides PyFlink's per-record `TimestampAssigner`, Millrace has a vectorized
`FieldTimestampAssigner` (`TimestampAssigner.from_field("ts_ms")`) that takes a ColumnBatch's
column as the timestamps without calling Python per record.
"""
from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.api.common.time import Duration, to_millis
from runtime.core.records import ColumnBatch, RecordBatch
from runtime.core.row import named_row_field


class TimestampAssigner(abc.ABC):
    @abc.abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int) -> int: ...

    def extract_timestamps(self, batch: RecordBatch) -> np.ndarray:
        """Timestamps of a whole batch (override for a vectorized path)."""
        ts_in = batch.timestamps
        from runtime.core.records import MIN_TIMESTAMP

        if ts_in is None:
            out = [self.extract_timestamp(v, MIN_TIMESTAMP) for v in batch.rows()]
        else:
            out = [self.extract_timestamp(v, t) for v, t in zip(batch.rows(), ts_in.tolist())]
        return np.asarray(out, dtype=np.int64)

    @staticmethod
    def from_field(field: str) -> FieldTimestampAssigner:
        return FieldTimestampAssigner(field)


class FieldTimestampAssigner(TimestampAssigner):
    """Event time (ms) is the record's field `field`; a ColumnBatch's column is used directly."""

    def __init__(self, field: str) -> None:
        self.field = field

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return _to_ms_scalar(value[self.field])

    def extract_timestamps(self, batch: RecordBatch) -> np.ndarray:
        if isinstance(batch, ColumnBatch):
            col = batch.columns[self.field]
            if col.dtype.kind == "M":  # datetime64 -> epoch ms
                return col.astype("datetime64[ms]").astype(np.int64)
            return col.astype(np.int64, copy=False)
        values = named_row_field(batch.rows(), self.field)
        if values is not None and set(map(type, values)) == {int}:  # int ms in named Rows: no call per record
            try:
                return np.array(values, dtype=np.int64)
            except OverflowError:
                pass
        return super().extract_timestamps(batch)

    def __repr__(self) -> str:
        return f"FieldTimestampAssigner({self.field!r})"


class _CallableTimestampAssigner(TimestampAssigner):
    def __init__(self, fn: Callable[..., int]) -> None:
        self.fn = fn

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self.fn(value, record_timestamp)


def _to_ms_scalar(v: Any) -> int:
    if isinstance(v, np.datetime64):
        return int(v.astype("datetime64[ms]").astype(np.int64))
    if hasattr(v, "timestamp") and callable(v.timestamp):  # datetime
        return int(v.timestamp() * 1000)
    return int(v)


class WatermarkStrategy:
    """How event time is assigned and how watermarks are generated.

    kind: "bounded" (bounded out-of-orderness; monotonous = bounded with 0 delay) or "none".
    `with_idleness(t)`: a stream that got no record for t (processing time) is marked idle
    (Flink's WatermarksWithIdleness / WatermarkStatus): downstream, its watermark holds nothing
    back until records come again.
    """

    def __init__(
        self,
        kind: str,
        max_out_of_orderness_ms: int = 0,
        timestamp_assigner: TimestampAssigner | None = None,
        idleness_ms: int | None = None,
    ) -> None:
        self.kind = kind
        self.max_out_of_orderness_ms = max_out_of_orderness_ms
        self.timestamp_assigner = timestamp_assigner
        self.idleness_ms = idleness_ms

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration | int) -> WatermarkStrategy:
        ms = to_millis(max_out_of_orderness)
        if ms < 0:
            raise ValueError("max_out_of_orderness must not be negative")
        return WatermarkStrategy("bounded", ms)

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        return WatermarkStrategy("bounded", 0)

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        return WatermarkStrategy("none")

    def with_timestamp_assigner(self, timestamp_assigner: TimestampAssigner | Callable[..., int]) -> WatermarkStrategy:
        if not isinstance(timestamp_assigner, TimestampAssigner):
            if not callable(timestamp_assigner):
                raise TypeError(
                    f"with_timestamp_assigner(): expected a TimestampAssigner, got {type(timestamp_assigner).__name__}"
                )
            timestamp_assigner = _CallableTimestampAssigner(timestamp_assigner)
        return WatermarkStrategy(self.kind, self.max_out_of_orderness_ms, timestamp_assigner, self.idleness_ms)

    def with_idleness(self, idle_timeout: Duration | int) -> WatermarkStrategy:
        return WatermarkStrategy(self.kind, self.max_out_of_orderness_ms, self.timestamp_assigner, to_millis(idle_timeout))

    @property
    def generates_watermarks(self) -> bool:
        return self.kind != "none"

    def __repr__(self) -> str:
        return (
            f"WatermarkStrategy({self.kind}, delay={self.max_out_of_orderness_ms}ms, "
            f"assigner={self.timestamp_assigner!r}, idleness={self.idleness_ms})"
        )
