from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

from runtime.core.records import END_OF_PARTITION, ColumnBatch, EndOfPartition, Watermark
from runtime.taskmanager.network.errors import (
    PartitionNotFoundError,
    PartitionReleasedError,
    ProducerFailedError,
)
from runtime.taskmanager.network.input import InputGate, LocalInputChannel
from runtime.taskmanager.network.partition import ResultPartition, ResultPartitionID, ResultPartitionManager

pytestmark = pytest.mark.unit


def batch(i: int) -> ColumnBatch:
    return ColumnBatch({"i": np.array([i], dtype=np.int64)})


def wait_until(cond, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


def test_add_blocks_at_capacity_until_consumed() -> None:
    p = ResultPartition("p", 1, capacity_per_subpartition=3)
    view = p.create_view(0, lambda: None)
    added: list[int] = []

    def produce() -> None:
        for i in range(10):
            p.add(0, batch(i))
            added.append(i)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_until(lambda: p.is_producer_blocked(0))
    assert len(added) == 3 and p.backlog(0) == 3
    got = []
    while len(got) < 10:
        el, _ = view.poll()
        if el is None:
            time.sleep(0.001)
            continue
        assert p.backlog(0) <= 3
        assert isinstance(el, ColumnBatch)
        got.append(int(el.columns["i"][0]))
    t.join(5)
    assert got == list(range(10))


def test_events_never_block() -> None:
    p = ResultPartition("p", 2, capacity_per_subpartition=1)
    p.add(0, batch(0))
    p.add(0, Watermark(3))  # full, but an event: no wait
    p.finish()
    view = p.create_view(0, lambda: None)
    assert [type(view.poll()[0]).__name__ for _ in range(3)] == ["ColumnBatch", "Watermark", "EndOfPartition"]


def test_release_wakes_a_blocked_producer() -> None:
    p = ResultPartition("p", 1, capacity_per_subpartition=1, producer_attempt_id="a1")
    p.add(0, batch(0))
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            p.add(0, batch(1))
        except BaseException as e:  # noqa: BLE001  # whatever ends the thread is handed to the test, which checks it
            errors.append(e)

    t = threading.Thread(target=produce, daemon=True)
    t.start()
    wait_until(lambda: p.is_producer_blocked())
    p.release()
    t.join(5)
    assert not t.is_alive()
    assert isinstance(errors[0], PartitionReleasedError) and "p@a1" in str(errors[0])


def test_fail_surfaces_on_the_reader_naming_the_partition() -> None:
    p = ResultPartition("ds:3", 1, producer_attempt_id="att7")
    notified = threading.Event()
    view = p.create_view(0, notified.set)
    p.add(0, batch(0))
    p.fail(RuntimeError("boom"))
    assert notified.is_set()
    with pytest.raises(ProducerFailedError, match=r"ds:3@att7.*boom"):
        view.poll()


def test_manager_wait_for_and_full_consumption_unregisters() -> None:
    m = ResultPartitionManager()
    rpid = ResultPartitionID("ds:0", "att")

    async def main() -> None:
        with pytest.raises(PartitionNotFoundError, match="ds:0@att"):
            await m.wait_for(rpid, timeout=0.05)
        p = ResultPartition("ds:0", 1, producer_attempt_id="att")
        threading.Timer(0.05, m.register, args=(p,)).start()
        assert await m.wait_for(rpid, timeout=5) is p

    asyncio.run(main())
    p = m.get(rpid)
    assert p is not None
    p.finish()
    view = p.create_view(0, lambda: None)
    assert view.poll()[0] is END_OF_PARTITION
    assert m.get(rpid) is None  # fully consumed -> released -> unregistered
    q = ResultPartition("ds:1", 1, producer_attempt_id="att")
    m.register(q)
    assert m.release_partitions_of("att") == 1 and q.is_released


def make_local_gate(m: ResultPartitionManager, rpids: list[ResultPartitionID], timeout: float = 30.0) -> InputGate:
    gate = InputGate("g")
    gate.set_channels([LocalInputChannel(gate, i, r, 0, m, timeout) for i, r in enumerate(rpids)])
    gate.request_partitions()
    return gate


def test_local_gate_reads_two_producers_including_late_registration() -> None:
    m = ResultPartitionManager()
    r0, r1 = ResultPartitionID("a:0", "x"), ResultPartitionID("a:1", "y")
    gate = make_local_gate(m, [r0, r1])
    assert gate.poll_next(0.01) is None  # nothing registered yet: times out, no error
    p0 = ResultPartition("a:0", 1, 2, "x")
    m.register(p0)
    p1 = ResultPartition("a:1", 1, 2, "y")

    def produce(p: ResultPartition, base: int) -> None:
        for i in range(50):
            p.add(0, batch(base + i))
        p.finish()

    threads = [threading.Thread(target=produce, args=(p0, 0)), threading.Thread(target=produce, args=(p1, 1000))]
    threads[0].start()
    time.sleep(0.05)
    m.register(p1)
    threads[1].start()
    per_channel: dict[int, list[int]] = {0: [], 1: []}
    while not gate.is_finished:
        r = gate.poll_next(5.0)
        assert r is not None
        ch, el = r
        if isinstance(el, ColumnBatch):
            per_channel[ch].append(int(el.columns["i"][0]))
        else:
            assert isinstance(el, EndOfPartition)
    assert per_channel == {0: list(range(50)), 1: list(range(1000, 1050))}
    assert gate.poll_next(0.01) is None
    for t in threads:
        t.join(5)
    gate.close()


def test_local_gate_errors() -> None:
    m = ResultPartitionManager()
    gate = make_local_gate(m, [ResultPartitionID("never:0", "z")], timeout=0.05)
    with pytest.raises(PartitionNotFoundError, match="never:0@z"):
        for _ in range(100):
            gate.poll_next(0.02)
    p = ResultPartition("f:0", 1, producer_attempt_id="q")
    m.register(p)
    gate2 = make_local_gate(m, [ResultPartitionID("f:0", "q")])
    p.add(0, batch(1))
    assert gate2.poll_next(1.0) is not None
    threading.Timer(0.05, p.fail, args=(ValueError("bad record"),)).start()
    with pytest.raises(ProducerFailedError, match="f:0@q.*bad record"):
        gate2.poll_next(5.0)
    with pytest.raises(ProducerFailedError):
        gate2.poll_next(0.0)


def test_pipelined_subpartition_is_consumed_once() -> None:
    from runtime.taskmanager.network.errors import PartitionError

    p = ResultPartition("once:0", 1, producer_attempt_id="a")
    v = p.create_view(0, lambda: None)
    v.release()
    with pytest.raises(PartitionError, match="only be consumed once"):
        p.create_view(0, lambda: None)
