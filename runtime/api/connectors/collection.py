"""from_collection: a non-parallel bounded source over an in-memory list (Flink's
FromElementsFunction is parallelism 1 too), on FLIP-27.

The position is state: a split is `CollectionSplit(next, end)`, the list positions [next, end) not
yet emitted. The enumerator holds `(0, len(values))` until the reader asks (other readers, if
forced, get no split); a restored reader emits exactly the splits it got back, from their `next` on.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from runtime.api.connectors.base import Source
from runtime.api.connectors.source.api import SourceReaderBase, SourceReaderContext, SplitEnumeratorContext
from runtime.api.connectors.source.enumerators import StaticSplitEnumerator, restored_splits
from runtime.core.errors import InvalidProgramError
from runtime.core.records import ColumnBatch, ObjectBatch, RecordBatch
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


class CollectionSplit(NamedTuple):
    """The list positions [next, end) not yet emitted."""

    next: int
    end: int

    @property
    def split_id(self) -> str:
        return "collection"


class CollectionSourceReader(SourceReaderBase[CollectionSplit]):
    def __init__(self, context: SourceReaderContext, source: CollectionSource) -> None:
        super().__init__(context)
        self.source = source
        self._dtypes = _columnar_dtypes(source.type_info)

    def add_splits(self, splits: list[CollectionSplit]) -> None:
        n = len(self.source.values)
        for x in splits:
            ok = isinstance(x, (tuple, list)) and len(x) == 2 and all(isinstance(v, int) for v in x) and 0 <= x[0] <= x[1] <= n
            if not ok:
                c = self.context
                raise InvalidProgramError(
                    f"CollectionSource (subtask {c.index_of_subtask + 1}/{c.current_parallelism}): restored split {x!r} is not a "
                    f"split (next, end) of this collection of {n} elements; the checkpoint belongs to another source under the "
                    "same uid: give this source its own uid or start without the checkpoint"
                )
        super().add_splits(sorted(CollectionSplit(int(a), int(b)) for a, b in splits if a < b))

    def read_next(self, split: CollectionSplit) -> tuple[RecordBatch, CollectionSplit] | None:
        pos, end = split
        if pos >= end:
            return None
        chunk = self.source.values[pos : min(end, pos + self.source.batch_size)]
        return self._to_batch(chunk), CollectionSplit(pos + len(chunk), end)

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

    def create_enumerator(self, context: SplitEnumeratorContext[CollectionSplit]) -> StaticSplitEnumerator[CollectionSplit]:
        return StaticSplitEnumerator(context, [CollectionSplit(0, len(self.values))] if self.values else [])

    def restore_enumerator(self, context: SplitEnumeratorContext[CollectionSplit], checkpoint: Any) -> StaticSplitEnumerator[CollectionSplit]:
        n = len(self.values)
        pending = restored_splits(checkpoint, "CollectionSource", lambda x: isinstance(x, tuple) and len(x) == 2 and 0 <= x[0] <= x[1] <= n)
        return StaticSplitEnumerator(context, [CollectionSplit(*x) for x in pending])

    def create_reader(self, context: SourceReaderContext) -> CollectionSourceReader:
        return CollectionSourceReader(context, self)

    def max_parallelism(self) -> int | None:
        return 1

    def get_type_info(self) -> Any:
        return self.type_info
