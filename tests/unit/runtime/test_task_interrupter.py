"""TaskInterrupter: an exception in a thread only inside its window, at most once, never after it."""
from __future__ import annotations

import threading
import time

from runtime.taskmanager.interrupt import TaskInterruptedError, TaskInterrupter


def _busy_thread(interrupter: TaskInterrupter, seconds: float, outcome: list[str], in_window: threading.Event) -> threading.Thread:
    def run() -> None:
        try:
            interrupter.open_window()
            try:
                in_window.set()
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    time.sleep(0.01)  # user code in short steps
                outcome.append("ran to the end")
            finally:
                interrupter.close_window()
            outcome.append("left the window normally")
        except TaskInterruptedError:
            outcome.append("interrupted")
        after = time.monotonic() + 0.1
        while time.monotonic() < after:  # clean-up code after the window: must not be hit
            pass
        outcome.append("clean-up done")

    return threading.Thread(target=run, daemon=True)


def test_a_thread_in_its_window_is_interrupted_once() -> None:
    interrupter, outcome, in_window = TaskInterrupter(), [], threading.Event()
    t = _busy_thread(interrupter, 30, outcome, in_window)
    t.start()
    assert in_window.wait(5)
    assert interrupter.interrupt() is True
    t.join(5)
    assert not t.is_alive()
    assert outcome == ["interrupted", "clean-up done"]
    assert interrupter.interrupt() is False  # at most once


def test_no_interrupt_outside_the_window() -> None:
    interrupter, outcome, in_window = TaskInterrupter(), [], threading.Event()
    assert interrupter.interrupt() is False  # not opened yet
    t = _busy_thread(interrupter, 0.05, outcome, in_window)
    t.start()
    t.join(5)
    assert interrupter.interrupt() is False  # closed
    assert outcome == ["ran to the end", "left the window normally", "clean-up done"]


def test_an_interrupt_sent_as_the_window_closes_fires_inside_it() -> None:
    """Sent while the thread blocks in C just before closing: it fires before the clean-up, never in it."""
    interrupter, outcome = TaskInterrupter(), []
    blocked, release = threading.Event(), threading.Event()

    def run() -> None:
        try:
            interrupter.open_window()
            try:
                blocked.set()
                release.wait()  # a C-level wait: the asynchronous exception cannot fire during it
            finally:
                interrupter.close_window()
            outcome.append("left the window normally")
        except TaskInterruptedError:
            outcome.append("interrupted")
        outcome.append("clean-up done")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert blocked.wait(5)
    assert interrupter.interrupt() is True
    release.set()
    t.join(5)
    assert outcome == ["interrupted", "clean-up done"]
