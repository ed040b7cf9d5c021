"""Keyed state: backends (hashmap, rocksdb) that snapshot per key group, and timers."""
from __future__ import annotations

from runtime.core.errors import ConfigurationError
from runtime.core.keygroups import KeyGroupRange
from runtime.state.backend import VOID_NAMESPACE, KeyedStateBackend, StateError, StateTable
from runtime.state.changelog import ChangelogOptions
from runtime.state.heap import HashMapKeyedStateBackend

BACKEND_KINDS = ("hashmap", "rocksdb")


def create_keyed_state_backend(
    kind: str = "hashmap",
    key_group_range: KeyGroupRange | None = None,
    max_parallelism: int = 128,
    operator_id: str = "operator",
    local_dir: str | None = None,
    changelog: ChangelogOptions | None = None,
) -> KeyedStateBackend:
    """Flink: StateBackend.createKeyedStateBackend. `kind` is Flink's state.backend.type value."""
    rng = key_group_range if key_group_range is not None else KeyGroupRange(0, max_parallelism - 1)
    k = (kind or "hashmap").lower()
    if k in ("hashmap", "heap", "memory", "filesystem"):
        return HashMapKeyedStateBackend(rng, max_parallelism, operator_id)
    if k in ("rocksdb", "rocks"):
        from runtime.state.rocksdb import RocksDBKeyedStateBackend

        return RocksDBKeyedStateBackend(rng, max_parallelism, operator_id, local_dir=local_dir, changelog=changelog)
    raise ConfigurationError(
        f"unknown state backend {kind!r} for operator {operator_id}: use one of {', '.join(BACKEND_KINDS)}"
    )


__all__ = [
    "BACKEND_KINDS",
    "VOID_NAMESPACE",
    "KeyedStateBackend",
    "StateError",
    "StateTable",
    "HashMapKeyedStateBackend",
    "create_keyed_state_backend",
]
