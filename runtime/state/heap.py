"""The hashmap keyed state backend: state lives in Python dicts on the task's heap.

Port of Flink's HeapKeyedStateBackend (StateTable -> one map per key group, so a snapshot or a
rescale touches whole key groups). Layout: state name -> key group -> (key, namespace) -> value.
Like Flink's heap backend, values are stored by reference (no copy on read or write).

Snapshots copy on snapshot: the synchronous part copies each key group's dict (dict.copy, C speed)
and, where the table holds values that can change in place, those values too (see `_pinned`);
the supplier hands the entries over as columns (`StateEntries`).
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from runtime.core.checkpoint import KeyedSnapshot, StateEntries, snapshot_is_copy_on_write
from runtime.core.gc_pause import gc_paused
from runtime.core.keygroups import KeyGroupRange
from runtime.core.state import StateKind
from runtime.state.backend import KeyedStateBackend, StateTable

# values nothing can change in place: a snapshot may share them with the live state
_IMMUTABLE = frozenset({int, float, complex, bool, str, bytes, type(None), tuple, frozenset, range})
_SHALLOW_COPY: dict[type, Callable[[Any], Any]] = {list: list.copy, dict: dict.copy, set: set.copy, bytearray: bytearray}


def _copy_mutable(value: Any) -> Any:
    return value if type(value) in _IMMUTABLE else copy.copy(value)


def _pinned(m: dict[tuple[Any, Any], Any], fresh: bool = False) -> dict[tuple[Any, Any], Any]:
    """`m` with its mutable values copied one level deep (`fresh`: `m` itself may be returned).

    Why copy: list and map values are changed in place by this table (list_add, map_put,
    map_put_all, map_remove), an AggregateFunction (or ReduceFunction) may change its accumulator
    in place and return it, and user code may change a value object and update() it again.
    Immutable values (numbers, strings, tuples...) are shared. The copy is shallow: an object
    nested inside a value (a list inside a tuple) must be replaced, not changed in place, once it
    is in state (Flink's rule for state objects).
    """
    types = set(map(type, m.values()))
    if types <= _IMMUTABLE:
        return m if fresh else m.copy()
    copier = _SHALLOW_COPY.get(next(iter(types))) if len(types) == 1 else None
    return dict(zip(m, map(copier or _copy_mutable, m.values())))


class HeapStateTable(StateTable):
    __slots__ = ("maps", "mutable_values")

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(name, kind)
        self.maps: dict[int, dict[tuple[Any, Any], Any]] = {}
        # whether a value that can change in place was ever stored (then snapshots copy values);
        # until then a snapshot is one dict.copy per key group (e.g. ValueState[int])
        self.mutable_values = kind in (StateKind.LIST, StateKind.MAP)

    def get(self, kg: int, key: Any, ns: Any) -> Any:
        m = self.maps.get(kg)
        return None if m is None else m.get((key, ns))

    def put(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        m = self.maps.get(kg)
        if m is None:
            m = self.maps[kg] = {}
        m[(key, ns)] = value
        if type(value) not in _IMMUTABLE:
            self.mutable_values = True

    def remove(self, kg: int, key: Any, ns: Any) -> None:
        m = self.maps.get(kg)
        if m is not None:
            m.pop((key, ns), None)

    # in-place list/map updates: no re-put needed on the heap
    def list_add(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        m = self.maps.get(kg)
        if m is None:
            m = self.maps[kg] = {}
        cur = m.get((key, ns))
        if cur is None:
            m[(key, ns)] = [value]
        else:
            cur.append(value)

    def map_put(self, kg: int, key: Any, ns: Any, user_key: Any, value: Any) -> None:
        m = self.maps.get(kg)
        if m is None:
            m = self.maps[kg] = {}
        d = m.get((key, ns))
        if d is None:
            m[(key, ns)] = {user_key: value}
        else:
            d[user_key] = value

    def keys(self, namespace: Any) -> Iterator[Any]:
        # materialized so callers may modify state while iterating
        return iter([k for m in self.maps.values() for (k, ns) in m if ns == namespace])

    def keys_and_namespaces(self) -> Iterator[tuple[Any, Any]]:
        return iter([kn for m in self.maps.values() for kn in m])

    def put_all(self, kg: int, entries: Sequence[tuple[Any, Any, Any]]) -> None:
        cols = StateEntries.of(entries)
        loaded = dict(zip(cols.pairs, cols.values))
        # the values become live state, changed in place later: never share them with the snapshot
        own = _pinned(loaded, fresh=True)
        if own is not loaded:
            self.mutable_values = True
        self.maps.setdefault(kg, {}).update(own)

    def snapshot_sync(self) -> Callable[[], dict[int, StateEntries]]:
        """Pin every key group (see `_pinned`); the supplier hands over {key group: entries} as columns."""
        if snapshot_is_copy_on_write():  # read in a forked child: its image is already the snapshot
            pinned = {kg: m for kg, m in self.maps.items() if m}
        elif self.mutable_values:
            pinned = {kg: _pinned(m) for kg, m in self.maps.items() if m}
        else:
            pinned = {kg: m.copy() for kg, m in self.maps.items() if m}
        return lambda: {kg: StateEntries.of_map(m) for kg, m in pinned.items()}


class HashMapKeyedStateBackend(KeyedStateBackend[HeapStateTable]):
    """Flink: HeapKeyedStateBackend (state.backend.type: hashmap)."""

    kind = "hashmap"

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int, operator_id: str) -> None:
        super().__init__(key_group_range, max_parallelism, operator_id)

    def _create_table(self, name: str, kind: str) -> HeapStateTable:
        return HeapStateTable(name, kind)

    def snapshot_sync(self) -> Callable[[], KeyedSnapshot]:
        parts = [(name, t.kind, t.snapshot_sync()) for name, t in self._tables.items()]

        def supplier() -> KeyedSnapshot:
            out: KeyedSnapshot = {}
            with gc_paused():
                for name, kind, entries_of in parts:
                    for kg, entries in entries_of().items():
                        out.setdefault(kg, {})[name] = (kind, entries)
            return out

        return supplier
