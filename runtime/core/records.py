"""What flows between operators: record batches and in-band control events.

Records always travel in batches. A batch is either columnar (`ColumnBatch`: named numpy
columns, the fast path when the schema is known) or a list of Python objects (`ObjectBatch`).
Both may carry one int64 event timestamp (ms) per record. Control events (watermarks,
end-of-partition, and later checkpoint barriers) travel between batches, never inside one.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from runtime.core.row import Row

MIN_TIMESTAMP = -(1 << 63)
MAX_TIMESTAMP = (1 << 63) - 1


class RecordBatch:
    """A batch of records with optional per-record timestamps."""

    __slots__ = ("timestamps",)
    timestamps: np.ndarray | None

    def __len__(self) -> int:
        raise NotImplementedError

    def rows(self) -> list[Any]:
        """The records as Python values (Row objects for a ColumnBatch)."""
        raise NotImplementedError

    def take(self, indices: np.ndarray) -> RecordBatch:
        raise NotImplementedError

    def split_by(self, channel_of_record: np.ndarray, n_channels: int) -> list[RecordBatch | None]:
        """Split into per-channel batches (order within a channel preserved)."""
        if len(self) == 0:
            return [None] * n_channels
        order = np.argsort(channel_of_record, kind="stable")
        counts = np.bincount(channel_of_record, minlength=n_channels)
        out: list[RecordBatch | None] = []
        start = 0
        for c in range(n_channels):
            n = int(counts[c])
            if n == 0:
                out.append(None)
            elif n == len(self):
                out.append(self)
            else:
                out.append(self.take(order[start : start + n]))
            start += n
        return out

    def records_with_timestamps(self) -> Iterator[tuple[Any, int | None]]:
        ts = self.timestamps
        if ts is None:
            for r in self.rows():
                yield r, None
        else:
            yield from zip(self.rows(), ts.tolist())


class ObjectBatch(RecordBatch):
    """Records as a list of arbitrary Python values."""

    __slots__ = ("values",)

    def __init__(self, values: list[Any], timestamps: np.ndarray | None = None) -> None:
        self.values = values
        self.timestamps = timestamps

    def __len__(self) -> int:
        return len(self.values)

    def rows(self) -> list[Any]:
        return self.values

    def take(self, indices: np.ndarray) -> ObjectBatch:
        vals = self.values
        return ObjectBatch(
            [vals[i] for i in indices.tolist()],
            None if self.timestamps is None else self.timestamps[indices],
        )

    def __repr__(self) -> str:
        return f"ObjectBatch(n={len(self.values)})"

    def __reduce__(self):
        return (ObjectBatch, (self.values, self.timestamps))


class ColumnBatch(RecordBatch):
    """Records as named, equal-length numpy columns (the vectorized path)."""

    __slots__ = ("columns", "_n")

    def __init__(self, columns: dict[str, np.ndarray], timestamps: np.ndarray | None = None) -> None:
        self.columns = columns
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"columns have different lengths: { {k: len(v) for k, v in columns.items()} }")
        self._n = lengths.pop() if lengths else 0
        if timestamps is not None and len(timestamps) != self._n:
            raise ValueError(f"{len(timestamps)} timestamps for {self._n} records")
        self.timestamps = timestamps

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(self.columns)

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def rows(self) -> list[Row]:
        names = tuple(self.columns)
        cols = [c.tolist() for c in self.columns.values()]
        return [Row.of(names, vals) for vals in zip(*cols)]

    def take(self, indices: np.ndarray) -> ColumnBatch:
        return ColumnBatch(
            {k: v[indices] for k, v in self.columns.items()},
            None if self.timestamps is None else self.timestamps[indices],
        )

    def to_arrow(self):
        import pyarrow as pa

        return pa.RecordBatch.from_pydict({k: pa.array(v) for k, v in self.columns.items()})

    @classmethod
    def from_rows(cls, rows: Sequence[Row], timestamps: np.ndarray | None = None) -> ColumnBatch:
        if not rows:
            return cls({}, timestamps)
        names = rows[0].field_names
        if names is None:
            raise ValueError("rows need field names to become columns")
        cols = list(zip(*(r._values for r in rows)))
        return cls({n: np.asarray(c) for n, c in zip(names, cols)}, timestamps)

    def __repr__(self) -> str:
        return f"ColumnBatch(n={self._n}, fields={list(self.columns)})"

    def __reduce__(self):
        return (ColumnBatch, (self.columns, self.timestamps))


def concat_batches(batches: Sequence[RecordBatch]) -> RecordBatch:
    """Concatenate batches of the same kind (and, for columns, the same fields)."""
    if len(batches) == 1:
        return batches[0]
    with_ts = all(b.timestamps is not None for b in batches)
    ts = np.concatenate([b.timestamps for b in batches]) if with_ts else None
    column_batches = [b for b in batches if isinstance(b, ColumnBatch)]
    if len(column_batches) == len(batches):
        names = column_batches[0].columns.keys()
        return ColumnBatch({n: np.concatenate([b.columns[n] for b in column_batches]) for n in names}, ts)
    values: list[Any] = []
    for b in batches:
        values.extend(b.rows())
    return ObjectBatch(values, ts)


@dataclass(frozen=True, slots=True)
class Watermark:
    """Event time has reached `timestamp`: no record with a smaller timestamp follows."""

    timestamp: int


@dataclass(frozen=True, slots=True)
class WatermarkStatus:
    """Flink's WatermarkStatus: an idle stream (no records for a while) holds back no watermark
    downstream until it is active again (WatermarkStrategy.with_idleness)."""

    idle: bool


IDLE = WatermarkStatus(True)
ACTIVE = WatermarkStatus(False)


@dataclass(frozen=True, slots=True)
class EndOfPartition:
    """The producer subpartition has no more data."""


END_OF_PARTITION = EndOfPartition()

from runtime.core.checkpoint import CheckpointBarrier  # noqa: E402 - in-band like the others

StreamElement = RecordBatch | Watermark | WatermarkStatus | EndOfPartition | CheckpointBarrier
