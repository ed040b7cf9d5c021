"""The hashmap keyed state backend: state lives in Python dicts on the task's heap.

Port of Flink's HeapKeyedStateBackend (StateTable -> one map per key group, so a snapshot or a
rescale touches whole key groups). Layout: state name -> key group -> (key, namespace) -> value.
Like Flink's heap backend, values are stored by reference (no copy on read or write).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

from runtime.core.keygroups import KeyGroupRange
from runtime.api.datastream.state import StateKind
from runtime.state.backend import KeyedStateBackend, StateTable, copy_if_mutable


class HeapStateTable(StateTable):
    __slots__ = ("maps",)

    def __init__(self, name: str, kind: str) -> None:
        super().__init__(name, kind)
        self.maps: dict[int, dict[tuple[Any, Any], Any]] = {}

    def get(self, kg: int, key: Any, ns: Any) -> Any:
        m = self.maps.get(kg)
        return None if m is None else m.get((key, ns))

    def put(self, kg: int, key: Any, ns: Any, value: Any) -> None:
        m = self.maps.get(kg)
        if m is None:
            m = self.maps[kg] = {}
        m[(key, ns)] = value

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

    def entries(self, kg: int) -> list[tuple[Any, Any, Any]]:
        m = self.maps.get(kg)
        if not m:
            return []
        return [(k, ns, v) for (k, ns), v in m.items()]

    def snapshot_sync(self, key_groups: KeyGroupRange) -> Callable[[], dict[int, list[tuple[Any, Any, Any]]]]:
        """Copy-on-snapshot at C speed: dict copies now, entries built later on the snapshot thread.

        List and map values are changed in place by this table (list_add, map_put), and reducing /
        aggregating accumulators may be changed in place by user functions, so those values are
        copied too; value state follows Flink's rule (do not mutate an object after update()).
        """
        if self.kind in (StateKind.LIST, StateKind.MAP):
            copies = {kg: {kn: (list(v) if type(v) is list else dict(v)) for kn, v in m.items()} for kg, m in self.maps.items() if m}
        elif self.kind in (StateKind.REDUCING, StateKind.AGGREGATING):
            copies = {kg: {kn: copy_if_mutable(v) for kn, v in m.items()} for kg, m in self.maps.items() if m}
        else:
            copies = {kg: m.copy() for kg, m in self.maps.items() if m}
        return lambda: {kg: [(k, ns, v) for (k, ns), v in m.items()] for kg, m in copies.items()}


class HashMapKeyedStateBackend(KeyedStateBackend):
    """Flink: HeapKeyedStateBackend (state.backend.type: hashmap)."""

    kind = "hashmap"

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int, operator_id: str) -> None:
        super().__init__(key_group_range, max_parallelism, operator_id)

    def _create_table(self, name: str, kind: str) -> StateTable:
        return HeapStateTable(name, kind)
