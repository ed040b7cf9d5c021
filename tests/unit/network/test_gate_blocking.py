"""InputGate channel blocking (for aligned checkpoints) with real local and remote channels."""
from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from runtime.core.checkpoint import CheckpointBarrier
from runtime.core.records import ColumnBatch, EndOfPartition
from runtime.graph.transformations import PartitionerKind
from runtime.rpc.deployment import DataAddress
from runtime.taskmanager.checkpoint_barrier_handler import AlignedBarrierHandler
from runtime.taskmanager.network.client import ConnectionManager, RemoteInputChannel
from runtime.taskmanager.network.errors import ProducerFailedError
from runtime.taskmanager.network.input import InputGate, LocalInputChannel
from runtime.taskmanager.network.partition import ResultPartition, ResultPartitionID, ResultPartitionManager
from runtime.taskmanager.network.partitioners import create_partitioner
from runtime.taskmanager.network.serialization import encode
from runtime.taskmanager.network.writer import RecordWriter

pytestmark = pytest.mark.unit


def batch(i: int) -> ColumnBatch:
    return ColumnBatch({"i": np.array([i], dtype=np.int64)})


def value(el: Any) -> int:
    return int(el.columns["i"][0])


def values(el: Any) -> list[int]:
    return [int(v) for v in el.columns["i"]]


def wait_until(cond, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


def local_gate(n: int, capacity: int = 2) -> tuple[InputGate, list[ResultPartition]]:
    m = ResultPartitionManager()
    parts = [ResultPartition(f"p:{i}", 1, capacity, "a") for i in range(n)]
    for p in parts:
        m.register(p)
    gate = InputGate("g")
    gate.set_channels([LocalInputChannel(gate, i, p.id, 0, m) for i, p in enumerate(parts)])
    gate.request_partitions()
    return gate, parts


def produce(p: ResultPartition, base: int, n: int) -> threading.Thread:
    def run() -> None:
        for i in range(n):
            p.add(0, batch(base + i))
        p.finish()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_blocked_channel_is_not_read_and_backpressures_while_others_flow() -> None:
    gate, (p0, p1) = local_gate(2, capacity=2)
    gate.block_channel(0)
    gate.block_channel(0)  # idempotent
    assert gate.is_blocked(0) and not gate.is_blocked(1) and gate.num_blocked == 1
    t0, t1 = produce(p0, 0, 20), produce(p1, 1000, 20)
    got1: list[int] = []
    while True:
        r = gate.poll_next(5.0 if len(got1) < 20 else 0.05)
        if r is None:
            break
        ch, el = r
        assert ch == 1, "nothing may come from the blocked channel"
        if not isinstance(el, EndOfPartition):
            got1.append(value(el))
    assert got1 == list(range(1000, 1020))
    # channel 0's data waits in its bounded subpartition; its producer is blocked, not buffering
    wait_until(lambda: p0.is_producer_blocked(0))
    assert p0.backlog(0) == 2 and t1.join(5) is None and t0.is_alive()
    assert not gate.is_finished
    gate.unblock_all()
    assert gate.num_blocked == 0
    got0: list[int] = []
    while not gate.is_finished:
        r = gate.poll_next(5.0)
        assert r is not None
        ch, el = r
        assert ch == 0
        if not isinstance(el, EndOfPartition):
            got0.append(value(el))
    assert got0 == list(range(20))
    t0.join(5)
    gate.close()


def test_blocking_a_channel_that_is_queued_with_data_and_unblocking_one_channel() -> None:
    gate, (p0, p1, p2) = local_gate(3, capacity=10)
    for p in (p0, p1, p2):
        for i in range(3):
            p.add(0, batch(i))
    r = gate.poll_next(1.0)  # takes one element; every channel is queued with data now
    assert r is not None
    first = r[0]
    others = [c for c in range(3) if c != first]
    gate.block_channel(others[0])
    gate.block_channel(first)
    seen = []
    while (r := gate.poll_next(0.05)) is not None:
        seen.append(r[0])
    assert seen == [others[1]] * 3
    gate.unblock_channel(others[0])
    gate.unblock_channel(others[0])  # no-op
    assert gate.is_blocked(first) and not gate.is_blocked(others[0])
    seen = []
    while (r := gate.poll_next(0.05)) is not None:
        seen.append(r[0])
    assert seen == [others[0]] * 3
    gate.unblock_all()
    seen = []
    while (r := gate.poll_next(0.05)) is not None:
        seen.append(r[0])
    assert seen == [first] * 2
    # unblocking a channel that had no data does not wake the reader spuriously for nothing
    gate.block_channel(first)
    gate.unblock_all()
    assert gate.poll_next(0.01) is None
    p0.add(0, batch(9))
    assert gate.poll_next(1.0) is not None
    gate.close()


def test_producer_failure_surfaces_while_the_channel_is_blocked() -> None:
    gate, (p0, _p1) = local_gate(2)
    p0.add(0, batch(1))
    gate.block_channel(0)
    assert gate.poll_next(0.02) is None
    threading.Timer(0.02, p0.fail, args=(ValueError("bad record"),)).start()
    with pytest.raises(ProducerFailedError, match="p:0@a.*bad record"):
        gate.poll_next(5.0)
    gate.close()


def test_aligned_barriers_through_real_writers_and_gate() -> None:
    """Exactly-once alignment end to end in one process: the checkpoint sees precisely the
    records before the barrier on every channel, none after."""
    n_channels, before, after = 3, 30, 30
    gate, parts = local_gate(n_channels, capacity=2)
    writers = [RecordWriter(p, create_partitioner(PartitionerKind.FORWARD, None, 1, 128), 4) for p in parts]
    go = [threading.Event() for _ in range(n_channels)]

    def run(k: int) -> None:
        w = writers[k]
        for i in range(before):
            w.emit(batch(k * 1000 + i))
        go[k].wait(5)  # the producers reach the barrier at different times
        w.broadcast_event(CheckpointBarrier(1, 0))
        for i in range(before, before + after):
            w.emit(batch(k * 1000 + i))
        w.finish()

    threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(n_channels)]
    for t in threads:
        t.start()
    processed: list[int] = []
    snapshots: list[list[int]] = []
    handler = AlignedBarrierHandler(
        n_channels, gate, lambda b: snapshots.append(sorted(processed)), lambda c, r: None
    )
    go[0].set()
    released = False
    while not gate.is_finished:
        r = gate.poll_next(5.0)
        assert r is not None
        ch, el = r
        if isinstance(el, CheckpointBarrier):
            handler.process_barrier(ch, el)
        elif isinstance(el, EndOfPartition):
            handler.process_end_of_partition(ch)
        else:
            vs = values(el)
            if handler.pending_checkpoint_id is not None:
                assert all(v % 1000 < before for v in vs), f"post-barrier records {vs} read during alignment"
            processed.extend(vs)
        if not released and gate.is_blocked(0):
            # channel 0 is aligned and blocked: its producer must stall, not buffer
            wait_until(lambda: parts[0].backlog(0) == 2 and parts[0].is_producer_blocked(0))
            time.sleep(0.02)
            assert parts[0].backlog(0) == 2 and parts[0].is_producer_blocked(0)
            go[1].set()
            go[2].set()
            released = True
    expected = sorted(k * 1000 + i for k in range(n_channels) for i in range(before))
    assert snapshots == [expected]
    assert sorted(processed) == sorted(k * 1000 + i for k in range(n_channels) for i in range(before + after))
    for t in threads:
        t.join(5)


# ---- remote channel: no credit while blocked -------------------------------------------------

@dataclass
class TestingClientConnection:
    """Stands in for client._ClientConnection: records the credit announced."""

    __test__ = False

    credits: list[int] = field(default_factory=list)
    closed: bool = False

    def add_credit(self, rid: int, credit: int) -> None:
        self.credits.append(credit)

    def cancel(self, rid: int) -> None:
        pass


def test_blocked_remote_channel_returns_no_credit_until_unblocked() -> None:
    loop = asyncio.new_event_loop()
    lt = threading.Thread(target=loop.run_forever, daemon=True)
    lt.start()
    try:
        gate = InputGate("g")
        ch = RemoteInputChannel(
            gate, 0, ResultPartitionID("r:0", "a"), 0, DataAddress(tm_id="tm", host="127.0.0.1", port=1),
            ConnectionManager("secret"), loop, initial_credit=2,
        )
        gate.set_channels([ch])
        conn = TestingClientConnection()
        ch._conn, ch._rid = conn, 1  # type: ignore[assignment]  # as if the request was sent
        # what the producer may send: its 2 credits of data, then the barrier (events are free)
        ch._on_buffer(encode(batch(0)))
        gate.block_channel(0)
        ch._on_buffer(encode(batch(1)))
        ch._on_buffer(encode(CheckpointBarrier(1, 0)))
        assert gate.poll_next(0.05) is None
        time.sleep(0.02)
        assert conn.credits == []  # the producer stays without credit: it cannot send more data
        gate.unblock_all()
        first, second, third = (gate.poll_next(1.0) for _ in range(3))
        assert first is not None and second is not None
        assert [value(first[1]), value(second[1])] == [0, 1]
        assert third == (0, CheckpointBarrier(1, 0))
        wait_until(lambda: sum(conn.credits) == 2)  # one credit per consumed batch, none for the event
        gate.close()
    finally:
        loop.call_soon_threadsafe(loop.stop)
        lt.join(5)
        loop.close()


def test_the_gate_counts_the_time_its_consumer_waited_for_input() -> None:
    """The task's idle time (its busy ratio is 1 - idle - backpressured) includes every wait for data."""
    gate, parts = local_gate(1)
    assert gate.poll_next(0.05) is None  # nothing produced yet: a full wait
    waited = gate.wait_ns
    assert waited >= 40_000_000
    parts[0].add(0, batch(1))
    assert gate.poll_next(1.0) is not None  # data there: no further wait
    assert gate.wait_ns == waited
