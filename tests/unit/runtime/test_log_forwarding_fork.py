"""A TaskManager forwards its log records through a thread with its own lock; a forked snapshot
writer must not inherit that handler (a lock held at the fork would hang the child when it logs)."""
from __future__ import annotations

import logging
import os
import threading
import time
from types import SimpleNamespace

import pytest

from runtime.taskmanager.runner import _forward_log

pytestmark = pytest.mark.unit


def test_a_forked_child_logs_without_the_forwarder_even_if_its_lock_was_held_at_the_fork() -> None:
    sent: list[str] = []
    te = SimpleNamespace(_rm=SimpleNamespace(call_sync=lambda method, msg, timeout: sent.append(msg.text)))
    handler, forwarder = _forward_log(te, "tm-test")
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with forwarder._cond:  # as the sender thread does, at the worst moment
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(5)
        pid = os.fork()
        if pid == 0:  # the child: log at WARNING, then leave
            try:
                logging.getLogger("runtime.test").warning("from the forked child")
                os._exit(0)
            except BaseException:  # noqa: BLE001 - any failure is the child's exit status
                os._exit(1)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0
                break
            time.sleep(0.02)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung logging through the inherited forwarder")
    finally:
        release.set()
        holder.join()
        logging.getLogger().removeHandler(handler)
        forwarder.close()
    logging.getLogger("runtime.test").warning("from the parent")
    assert not any("from the forked child" in text for text in sent)
