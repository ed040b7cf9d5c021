from __future__ import annotations

import asyncio
import random
import threading

import pytest

from runtime.core.errors import RpcError
from runtime.rpc.ordered_sender import OrderedSender

pytestmark = pytest.mark.unit


class FakeJobMaster:
    """Answers calls after a settable delay (a random one by default); records what arrived, in order."""

    def __init__(self) -> None:
        self.arrived: list[int] = []
        self.delay = lambda n: random.uniform(0, 0.003)
        self.fail_at: int | None = None
        self.release = threading.Event()
        self.release.set()

    async def call(self, method: str, n: int) -> str:
        await asyncio.sleep(self.delay(n))
        while not self.release.is_set():
            await asyncio.sleep(0.001)
        if n == self.fail_at:
            raise RpcError(f"lost {n}")
        self.arrived.append(n)
        return method


def test_calls_arrive_in_order_without_the_sender_waiting_for_each() -> None:
    jm = FakeJobMaster()
    jm.delay = lambda n: 0.004 if n % 2 == 0 else 0.0  # later calls would overtake earlier ones if not chained
    sender = OrderedSender(jm.call, max_in_flight=1000)
    for n in range(200):
        sender.send("send_operator_event", n)
    assert len(jm.arrived) < 200  # the sender went on before the answers
    sender.flush()
    assert jm.arrived == list(range(200))


def test_a_failed_call_is_raised_at_the_next_send_or_flush_and_later_calls_do_not_arrive() -> None:
    jm = FakeJobMaster()
    jm.fail_at = 3
    sender = OrderedSender(jm.call)
    for n in range(6):
        sender.send("send_operator_event", n)
    with pytest.raises(RpcError, match="lost 3"):
        sender.flush()
    assert jm.arrived == [0, 1, 2]
    with pytest.raises(RpcError):
        sender.send("send_operator_event", 6)
    assert jm.arrived == [0, 1, 2]


def test_at_most_max_in_flight_wait_unanswered() -> None:
    jm = FakeJobMaster()
    jm.release.clear()  # the JobManager pauses
    sender = OrderedSender(jm.call, max_in_flight=4, timeout_s=5)
    for n in range(4):
        sender.send("send_operator_event", n)  # handed over at once
    blocked = threading.Thread(target=sender.send, args=("send_operator_event", 4))
    blocked.start()
    blocked.join(0.2)
    assert blocked.is_alive() and jm.arrived == []  # the fifth waits for the oldest answer
    jm.release.set()
    blocked.join(5)
    assert not blocked.is_alive()
    sender.flush()
    assert jm.arrived == [0, 1, 2, 3, 4]
