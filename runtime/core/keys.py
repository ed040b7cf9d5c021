"""Key extraction shared by the hash partitioner and keyed operators (so both agree on keys).

A key selector is a callable `record -> key` (PyFlink's KeySelector or a lambda) or a field name
(str). A field name on a ColumnBatch is the vectorized path: no per-record Python call.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.core.keygroups import assign_to_key_group, assign_to_key_groups
from runtime.core.records import ColumnBatch, RecordBatch


class KeyExtractor:
    __slots__ = ("selector", "field", "_fn")

    def __init__(self, selector: Any) -> None:
        self.selector = selector
        self.field: str | None = None
        self._fn: Callable[[Any], Any]
        if isinstance(selector, str):
            self.field = selector
            name = selector
            self._fn = lambda r: r[name]
        elif hasattr(selector, "get_key") and callable(selector.get_key):
            self._fn = selector.get_key
        elif callable(selector):
            self._fn = selector
        else:
            raise TypeError(f"key selector must be a callable, a KeySelector or a field name, not {type(selector).__name__}")

    def key_of(self, record: Any) -> Any:
        return self._fn(record)

    def keys(self, batch: RecordBatch) -> np.ndarray | list[Any]:
        """Keys of every record: a numpy array on the vectorized path, else a list."""
        if self.field is not None and isinstance(batch, ColumnBatch):
            return batch.columns[self.field]
        fn = self._fn
        return [fn(r) for r in batch.rows()]

    def key_groups(self, batch: RecordBatch, max_parallelism: int) -> np.ndarray:
        return key_groups_of(self.keys(batch), max_parallelism)


def int_key_array(keys: list[Any]) -> np.ndarray | None:
    """`keys` as an int64 array when every key is a Python int that fits (then the key groups can be
    computed vectorized: stable_hash of an int is the same on both paths), else None."""
    if not keys or set(map(type, keys)) != {int}:
        return None
    try:
        return np.array(keys, dtype=np.int64)
    except OverflowError:
        return None


def key_groups_of(keys: np.ndarray | list[Any], max_parallelism: int) -> np.ndarray:
    """The key group of every key (vectorized for integer keys)."""
    arr = keys if isinstance(keys, np.ndarray) else int_key_array(keys)
    if arr is not None and arr.dtype.kind in "iub":
        return assign_to_key_groups(arr, max_parallelism)
    seq = keys.tolist() if isinstance(keys, np.ndarray) else keys
    return np.fromiter((assign_to_key_group(k, max_parallelism) for k in seq), dtype=np.int64, count=len(seq))
