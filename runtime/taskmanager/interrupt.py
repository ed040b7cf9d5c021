"""Interrupting a cancelled task's thread while it runs user code (Flink: TaskInterrupter).

Flink interrupts a cancelled task's thread so that user code blocked in `sleep` or I/O stops. A
Python thread cannot be interrupted from outside, but CPython can raise an exception in it at its
next bytecode boundary (`PyThreadState_SetAsyncExc`): a user function that loops or sleeps in short
steps stops within one step instead of running its whole batch. A thread blocked in one long C
call still is not reached: the cancellation watchdog (the TaskManager exits) stays the last resort.

An asynchronous exception may land anywhere in the thread, so it is only sent inside an
*interruptible window* the task opens around its processing loop, at most once, and the task closes
the window (and lets a pending interrupt fire) before its own clean-up code runs.
"""
from __future__ import annotations

import ctypes
import threading
import time


class TaskInterruptedError(BaseException):
    """Raised in a cancelled task's thread. A BaseException, so user `except Exception` does not swallow it."""


_ABSORB_S = 0.05  # a pending asynchronous exception fires at the next bytecode; this is plenty


class TaskInterrupter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread_id: int | None = None
        self._sent = False

    def open_window(self) -> None:
        """Called by the task thread before its processing loop."""
        with self._lock:
            self._thread_id = threading.get_ident()

    def interrupt(self, exc_type: type[BaseException] = TaskInterruptedError) -> bool:
        """Raise `exc_type` in the task thread if it is inside the window; at most once.

        CPython instantiates `exc_type` with no arguments in the target thread (the memory watchdog
        sends a MemoryError subclass whose default message says why).
        """
        with self._lock:
            if self._thread_id is None or self._sent:
                return False
            sent = ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._thread_id), ctypes.py_object(exc_type))
            self._sent = sent == 1
            return self._sent

    def close_window(self) -> None:
        """Called by the task thread after its processing loop (also when it raised).

        If an interrupt was sent and has not fired yet, it fires here -- inside the task's main
        try block, never in its clean-up.
        """
        with self._lock:
            self._thread_id = None
            sent = self._sent
        if sent:
            deadline = time.monotonic() + _ABSORB_S
            while time.monotonic() < deadline:  # each iteration is a bytecode boundary: a pending interrupt fires
                pass
