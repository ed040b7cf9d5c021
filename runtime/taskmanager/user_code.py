"""Loading user code in a TaskManager: one thread at a time (Flink guards its user-code class loading too).

Deserializing a task's operators imports modules; two task threads importing modules with
circular imports at the same moment make Python's import machinery raise `_DeadlockError`
(seen when two subtasks of a fresh TaskManager start together). Loading is short and happens once
per task, so a process-wide lock costs nothing measurable.
"""
from __future__ import annotations

import threading
from typing import Any

import cloudpickle

_lock = threading.RLock()


def load_user_code(blob: bytes) -> Any:
    with _lock:
        return cloudpickle.loads(blob)


def instantiate(blob: bytes) -> Any:
    """Unpickle a factory and call it, both under the lock (the call may import too)."""
    with _lock:
        return cloudpickle.loads(blob)()
