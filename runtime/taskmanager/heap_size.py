"""What a slot's tasks hold on the Python heap: a walk of the objects reachable from their operators.

A TaskManager is one process whose tasks share one heap, so its resident memory cannot say which
slot holds what. The memory watchdog instead walks, per slot, the objects reachable from the
operators of its tasks (user functions and their closures, state backends, buffered records) and
sums their sizes (`sys.getsizeof`; numpy arrays count their data, Arrow objects their buffers).
Objects every task shares are not followed: modules and their globals, classes, the runtime's
network and RPC machinery, threads and locks, the Task objects themselves.

It is an estimate (allocator overhead and memory outside Python objects are not seen) and it
costs time in proportion to the objects held, so the watchdog walks only when the process has
grown by more than the smallest slot budget and at most at a rate that keeps the cost low.
"""
from __future__ import annotations

import gc
import sys
import types
from collections.abc import Iterable
from typing import Any

# objects of these modules are machinery shared by all tasks: not a slot's heap
_SHARED_MODULE_PREFIXES = (
    "runtime.taskmanager.network", "runtime.taskmanager.task", "runtime.taskmanager.task_executor", "runtime.rpc",
    "asyncio", "threading", "logging", "concurrent", "socket", "selectors", "queue",
)
_NOT_FOLLOWED = (types.ModuleType, type, types.CodeType, types.FrameType, types.BuiltinFunctionType)


def _module_dicts() -> set[int]:
    return {id(vars(m)) for m in list(sys.modules.values()) if m is not None and hasattr(m, "__dict__")}


def _own_size(obj: Any) -> int:
    mod = type(obj).__module__
    if mod.startswith("pyarrow"):
        nbytes = getattr(obj, "nbytes", None)  # Array, ChunkedArray, RecordBatch, Table, Buffer
        if isinstance(nbytes, int):
            return nbytes + sys.getsizeof(obj)
    try:
        return sys.getsizeof(obj)
    except TypeError:
        return 0


def _shared(obj: Any, module_dicts: set[int]) -> bool:
    if isinstance(obj, _NOT_FOLLOWED) or id(obj) in module_dicts:
        return True
    mod = type(obj).__module__
    return isinstance(mod, str) and mod.startswith(_SHARED_MODULE_PREFIXES)


class HeapWalker:
    """Sizes object graphs; objects seen once count once (one walker per slot)."""

    def __init__(self, exclude: Iterable[Any] = ()) -> None:
        self._module_dicts = _module_dicts()
        self._seen: set[int] = {id(o) for o in exclude}
        self.objects = 0

    def size_of(self, *roots: Any) -> int:
        total = 0
        stack = [r for r in roots if r is not None]
        seen = self._seen
        module_dicts = self._module_dicts
        while stack:
            obj = stack.pop()
            oid = id(obj)
            if oid in seen:
                continue
            seen.add(oid)
            if _shared(obj, module_dicts):
                continue
            self.objects += 1
            total += _own_size(obj)
            if isinstance(obj, (str, bytes, bytearray, int, float, bool)) or obj is None:
                continue
            stack.extend(gc.get_referents(obj))
        return total


__all__ = ["HeapWalker"]
