"""Calls from a plain thread that must arrive in order, without the thread waiting for each answer.

Flink's OperatorEventGateway.sendEventToCoordinator is asynchronous: a task hands the event over
and goes on. Millrace's tasks used a synchronous RPC per event, so a JobManager pausing (a garbage
collection, a busy main thread) stalled every task sending events -- a collect sink each batch.
Here each call is chained after the previous one (so the JobManager sees them in order, whatever
the connection does), at most `max_in_flight` wait unanswered (then the sender waits: back
pressure, bounded memory), and a failed call is raised in the sending thread at its next send or
flush -- the caller flushes before anything that must follow the events (a checkpoint
acknowledgement, a task's FINISHED report), so nothing counts on an event the JobManager did not get.
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from runtime.rpc.service import background_loop

DEFAULT_MAX_IN_FLIGHT = 64


class OrderedSender:
    def __init__(self, call: Callable[[str, Any], Awaitable[Any]], max_in_flight: int = DEFAULT_MAX_IN_FLIGHT, timeout_s: float = 60.0) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self._call = call
        self._max = max_in_flight
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._in_flight: collections.deque[concurrent.futures.Future] = collections.deque()

    def send(self, method: str, arg: Any) -> None:
        """Hand the call over; raises the error of an earlier call that failed."""
        with self._lock:
            self._reap()
            prev = self._in_flight[-1] if self._in_flight else None
            fut = asyncio.run_coroutine_threadsafe(self._after(prev, method, arg), background_loop())
            self._in_flight.append(fut)
            oldest = self._in_flight[0] if len(self._in_flight) > self._max else None
        if oldest is not None:
            oldest.result(self._timeout_s)  # back pressure: wait for the oldest answer

    def flush(self) -> None:
        """Wait until every call so far is answered; raises the first failure."""
        with self._lock:
            last = self._in_flight[-1] if self._in_flight else None
        if last is not None:
            last.result(self._timeout_s)  # chained: the last succeeds only if all before it did
        with self._lock:
            self._reap()

    async def _after(self, prev: concurrent.futures.Future | None, method: str, arg: Any) -> Any:
        if prev is not None:
            await asyncio.wrap_future(prev)  # strictly after the previous call; its failure is ours
        return await self._call(method, arg)

    def _reap(self) -> None:
        """Drop answered calls from the front; raise the first failure."""
        q = self._in_flight
        while q and q[0].done():
            q.popleft().result()
