"""Polling for a condition in tests that drive clusters and servers (never a fixed sleep), and a
clock a test moves by hand for the time-based logic it checks (heartbeat and idle timeouts, backoff)."""
from __future__ import annotations

import collections
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from runtime.core.states import ExecutionState
from runtime.rpc import messages as m


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


def job_details(cluster: Any, job_id: str) -> m.JobDetailsMessage:
    """A MiniCluster job's status and every subtask's attempt, state and metrics (what REST shows)."""
    return cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=10)


def wait_for_all_subtasks(cluster: Any, job_id: str, state: ExecutionState = ExecutionState.RUNNING, timeout: float = 60.0) -> m.JobDetailsMessage:
    """Wait until every subtask of the job is in `state`; the job's details then."""
    def reached() -> m.JobDetailsMessage | None:
        details = job_details(cluster, job_id)
        subtasks = [s for v in details.vertices for s in v.subtasks]
        return details if subtasks and all(s.state is state for s in subtasks) else None

    return wait_until(reached, timeout, f"every subtask of job {job_id} {state.name}", interval=0.05)


class ManualClock:
    """A monotonic clock that stands still until the test moves it (inject it where a component takes
    `clock`). It counts, per function name, the passes that read it (a call of a function, or a round
    of a loop that reads it at the same place each time), so a test can wait until a periodic check
    has run at the time it was set to, and acted on it, before asserting what it did."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._lock = threading.Lock()
        self._passes: collections.Counter[str] = collections.Counter()
        self._last: dict[str, tuple[Any, int]] = {}  # function -> (frame of its latest pass, bytecode offset of that pass's first read)

    def __call__(self) -> float:
        frame = sys._getframe(1)
        name = frame.f_code.co_name
        with self._lock:
            last_frame, first_read = self._last.get(name, (None, -1))
            # a new call, or a loop (a coroutine's while loop: one frame) back at its first read
            if frame is not last_frame or frame.f_lasti == first_read:
                self._passes[name] += 1
                self._last[name] = (frame, frame.f_lasti)
            return self._now

    def passes(self, function: str) -> int:
        """Passes of functions named `function` that read the clock so far."""
        with self._lock:
            return self._passes[function]

    def advance(self, seconds: float, then_wait_for: str | None = None, passes: int = 2, timeout: float = 30.0) -> None:
        """Move the clock on by `seconds`. With `then_wait_for`, wait until `passes` more passes of that
        function read the clock: on a component's one main thread, the first of them has then run to
        its end at the new time."""
        with self._lock:
            self._now += seconds
            seen = self._passes[then_wait_for] if then_wait_for else 0
        if then_wait_for:
            wait_until(lambda: self.passes(then_wait_for) >= seen + passes, timeout,
                       f"{passes} passes of {then_wait_for} at the new time", interval=0.01)
