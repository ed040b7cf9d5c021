"""Keys -> key groups -> subtasks, with a hash that is stable across processes.

Python's built-in hash() is salted per process, so it must never decide routing.
Port of Flink's KeyGroupRangeAssignment (contiguous key-group ranges per subtask).
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_MAX_PARALLELISM = 128
UPPER_BOUND_MAX_PARALLELISM = 1 << 15
_MASK64 = (1 << 64) - 1


def _fmix64(k: int) -> int:
    """MurmurHash3's 64-bit finalizer: a cheap, well-mixing, stable integer hash."""
    k &= _MASK64
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    k ^= k >> 33
    return k


def stable_hash(key: Any) -> int:
    """A non-negative 64-bit hash of `key` that is the same in every process and run."""
    if isinstance(key, bool):
        return _fmix64(int(key))
    if isinstance(key, int):
        return _fmix64(key)
    if isinstance(key, float):
        if key.is_integer():
            return _fmix64(int(key))
        return _fmix64(struct.unpack("<q", struct.pack("<d", key))[0])
    if isinstance(key, str):
        return _fmix64(zlib.crc32(key.encode("utf-8")) | (len(key) << 32))
    if isinstance(key, (bytes, bytearray)):
        return _fmix64(zlib.crc32(key) | (len(key) << 32))
    if key is None:
        return 0
    if isinstance(key, tuple) or hasattr(key, "_values"):
        values = tuple(key) if isinstance(key, tuple) else tuple(key._values)
        h = 17
        for v in values:
            h = (h * 31 + stable_hash(v)) & _MASK64
        return _fmix64(h)
    raise TypeError(
        f"key of type {type(key).__name__} is not keyable: use int, str, bytes, float, bool, "
        "None or a tuple/Row of those"
    )


def stable_hash_array(keys: np.ndarray) -> np.ndarray:
    """Vectorized stable_hash for an integer array: equal to stable_hash per element."""
    if keys.dtype.kind not in "iub":
        return np.fromiter((stable_hash(k) for k in keys.tolist()), dtype=np.uint64, count=len(keys))
    with np.errstate(over="ignore"):
        k = keys.astype(np.int64).view(np.uint64).copy()
        k ^= k >> np.uint64(33)
        k *= np.uint64(0xFF51AFD7ED558CCD)
        k ^= k >> np.uint64(33)
        k *= np.uint64(0xC4CEB9FE1A85EC53)
        k ^= k >> np.uint64(33)
    return k


def assign_to_key_group(key: Any, max_parallelism: int) -> int:
    return stable_hash(key) % max_parallelism


def assign_to_key_groups(keys: np.ndarray, max_parallelism: int) -> np.ndarray:
    return (stable_hash_array(keys) % np.uint64(max_parallelism)).astype(np.int64)


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """Flink: KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup."""
    return key_group * parallelism // max_parallelism


def operator_indexes_for_key_groups(max_parallelism: int, parallelism: int, key_groups: np.ndarray) -> np.ndarray:
    return (key_groups * parallelism) // max_parallelism


@dataclass(frozen=True)
class KeyGroupRange:
    """Inclusive range [start, end] of key groups owned by one subtask."""

    start: int
    end: int

    def __contains__(self, key_group: int) -> bool:
        return self.start <= key_group <= self.end

    def __len__(self) -> int:
        return max(0, self.end - self.start + 1)

    def __iter__(self):
        return iter(range(self.start, self.end + 1))


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """Flink: KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex."""
    check_parallelism(max_parallelism, parallelism)
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def check_parallelism(max_parallelism: int, parallelism: int) -> None:
    if not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"max parallelism must be in (0, {UPPER_BOUND_MAX_PARALLELISM}], got {max_parallelism}")
    if not 0 < parallelism <= max_parallelism:
        raise ValueError(
            f"parallelism {parallelism} must be in (0, max parallelism {max_parallelism}]"
        )


def key_to_subtask(key: Any, max_parallelism: int, parallelism: int) -> int:
    return compute_operator_index_for_key_group(
        max_parallelism, parallelism, assign_to_key_group(key, max_parallelism)
    )
