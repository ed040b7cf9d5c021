"""from_collection: a non-parallel bounded source over an in-memory list (Flink's
FromElementsFunction is parallelism 1 too).

The position is state: a split is `(next, end)`, the list positions [next, end) not yet emitted.
A fresh subtask 0 holds `(0, len(values))` (other subtasks, if forced, hold nothing); a restored
subtask emits exactly the splits it got back, from their `next` on.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from runtime.api.connectors.base import Source, SplitSourceOperator
from runtime.api.operators.base import InputStatus
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch, ObjectBatch, RecordBatch, Watermark
from runtime.core.row import Row

DEFAULT_BATCH_SIZE = 8192


def _columnar_dtypes(type_info: Any) -> dict[str, Any] | None:
    """numpy dtypes per field when type_info is a ROW_NAMED of scalar types, else None."""
    from runtime.api.common.typeinfo import BasicTypeInfo, RowTypeInfo

    if not isinstance(type_info, RowTypeInfo) or type_info.field_names is None:
        return None
    out: dict[str, Any] = {}
    for name, t in zip(type_info.field_names, type_info.field_types):
        if not isinstance(t, BasicTypeInfo) or t.to_arrow_type() is None:
            return None
        out[name] = t.to_numpy_dtype() or np.dtype(object)  # strings stay Python objects
    return out


def _normalize(values: Sequence[Any], type_info: Any) -> list[Any]:
    """PyFlink gives ROW-typed collections of tuples to functions as Rows."""
    from runtime.api.common.typeinfo import RowTypeInfo

    if isinstance(type_info, RowTypeInfo):
        names = tuple(type_info.field_names) if type_info.field_names is not None else None
        return [v if isinstance(v, Row) else Row.of(names, v) for v in values]
    return list(values)


class CollectionSourceOperator(SplitSourceOperator):
    def __init__(self, values: list[Any], type_info: Any = None, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        super().__init__()
        self.values = values
        self.type_info = type_info
        self.batch_size = batch_size
        self._splits: list[list[int]] = []  # [next, end], in list order
        self._dtypes = _columnar_dtypes(type_info)

    def initial_splits(self) -> list[tuple[int, int]]:
        assert self.ctx is not None
        # Flink runs from_collection with parallelism 1; extra subtasks (if forced) emit nothing
        return [(0, len(self.values))] if self.ctx.subtask_index == 0 and self.values else []

    def add_splits(self, splits: list[Any]) -> None:
        n = len(self.values)
        for x in splits:
            ok = isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(v, int) for v in x) and 0 <= x[0] <= x[1] <= n
            if not ok:
                raise InvalidProgramError(
                    f"{self.describe()}: restored split {x!r} is not a split (next, end) of this collection of {n} elements; "
                    "the checkpoint belongs to another source under the same uid: give this source its own uid or start without the checkpoint"
                )
            if x[0] < x[1]:
                self._splits.append([int(x[0]), int(x[1])])
        self._splits.sort()

    def snapshot_splits(self) -> list[tuple[int, int]]:
        return [(a, b) for a, b in self._splits]

    def emit_next(self) -> InputStatus:
        assert self.output is not None
        if not self._splits:
            return self._finish()
        split = self._splits[0]
        pos, end = split
        chunk = self.values[pos : min(end, pos + self.batch_size)]
        self.output.emit(self._to_batch(chunk))
        split[0] = pos + len(chunk)
        if split[0] >= end:
            self._splits.pop(0)
        return InputStatus.MORE_AVAILABLE if self._splits else self._finish()

    def _finish(self) -> InputStatus:
        assert self.output is not None
        self.output.emit_watermark(Watermark(MAX_TIMESTAMP))
        return InputStatus.END_OF_INPUT

    def _to_batch(self, chunk: list[Any]) -> RecordBatch:
        if self._dtypes is not None:
            try:
                cols = list(zip(*(list(r) for r in chunk)))
                return ColumnBatch({n: np.asarray(c, dtype=dt) for (n, dt), c in zip(self._dtypes.items(), cols)})
            except (TypeError, ValueError):
                pass  # e.g. None in an int column: fall back to objects
        return ObjectBatch(chunk)


class CollectionSource(Source):
    def __init__(self, collection: Sequence[Any], type_info: Any = None, batch_size: int = DEFAULT_BATCH_SIZE) -> None:
        self.values = _normalize(collection, type_info)
        self.type_info = type_info
        self.batch_size = batch_size

    def create_operator(self) -> CollectionSourceOperator:
        return CollectionSourceOperator(self.values, self.type_info, self.batch_size)

    def max_parallelism(self) -> int | None:
        return 1

    def get_type_info(self) -> Any:
        return self.type_info
