"""Polling for a condition in tests that drive clusters and servers (never a fixed sleep)."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition", interval: float = 0.2) -> Any:
    """Poll `predicate` until it returns something truthy and return that; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)
