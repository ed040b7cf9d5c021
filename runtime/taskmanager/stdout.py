"""A TaskManager's stdout, forwarded to the ResourceManager (Flink: the TaskManager's .out file,
served by REST /taskmanagers/{id}/stdout).

What tasks print (the print sink, `print()` in user functions) goes into a bounded buffer that one
sender thread ships in order, every `interval_s` or when a task asks for it: a task flushes before
it reports a terminal state, so its output has reached the JobManager process before the job can
end. An embedded run writes it to the client's stdout; a session cluster keeps a tail per
TaskManager. Writers wait while the buffer is full (a task printing faster than the output is
shipped is slowed down, not the TaskManager's memory grown).
"""
from __future__ import annotations

import io
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

log = logging.getLogger(__name__)

MAX_BUFFERED_CHARS = 4 * 1024 * 1024


class StdoutForwarder(io.TextIOBase):
    def __init__(self, send: Callable[[str], None], interval_s: float = 0.2, fallback: TextIO | None = None,
                 max_buffered: int = MAX_BUFFERED_CHARS) -> None:
        super().__init__()
        self._send = send
        self._interval_s = interval_s
        self._fallback = fallback  # where text goes if it cannot be sent (the process's own stdout)
        self._max = max_buffered
        self._parts: list[str] = []
        self._size = 0
        self._cond = threading.Condition()
        self._flushes: list[threading.Event] = []
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="stdout-forwarder", daemon=True)
        self._thread.start()

    # --- the stream ------------------------------------------------------------------------------
    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        if not s:
            return 0
        with self._cond:
            while self._size >= self._max and not self._closed:
                self._cond.notify_all()
                self._cond.wait(1.0)
            self._parts.append(s)
            self._size += len(s)
            if self._size >= self._max:
                self._cond.notify_all()
        return len(s)

    def flush(self) -> None:
        """Streams' flush: nothing to do (the sender ships on its own); see `forward`."""

    def forward(self, timeout_s: float = 30.0) -> bool:
        """Ship everything written so far and wait until it was sent; False on timeout."""
        done = threading.Event()
        with self._cond:
            if self._closed:
                return False
            self._flushes.append(done)
            self._cond.notify_all()
        return done.wait(timeout_s)

    def close(self) -> None:
        self.forward(5.0)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        super().close()

    # --- the sender thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._parts and not self._flushes and not self._closed:
                    self._cond.wait(self._interval_s)
                text, self._parts, self._size = "".join(self._parts), [], 0
                flushes, self._flushes = self._flushes, []
                closed = self._closed
                self._cond.notify_all()  # writers waiting for room
            if text:
                self._ship(text)
            for done in flushes:
                done.set()
            if closed:
                return

    def _ship(self, text: str) -> None:
        for attempt in range(3):
            try:
                self._send(text)
                return
            except Exception as e:  # noqa: BLE001 - the JobManager may be briefly unreachable
                if attempt == 2:
                    log.warning("could not forward %d characters of stdout: %s", len(text), e)
                    if self._fallback is not None:
                        try:
                            self._fallback.write(text)
                            self._fallback.flush()
                        except Exception:  # noqa: BLE001 - nowhere left to write it: the text is lost, as warned above
                            pass
                    return
                time.sleep(0.2 * (attempt + 1))


def install(send: Callable[[str], None], interval_s: float = 0.2) -> StdoutForwarder:
    """Replace sys.stdout with a forwarder (the original one stays its fallback)."""
    forwarder = StdoutForwarder(send, interval_s, fallback=sys.stdout)
    sys.stdout = forwarder
    return forwarder


def uninstall(forwarder: StdoutForwarder) -> None:
    if sys.stdout is forwarder:
        sys.stdout = forwarder._fallback or sys.__stdout__
    forwarder.close()
