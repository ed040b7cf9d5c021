"""The producer-side counters behind the REST metrics: time blocked on a full subpartition, bytes out."""
from __future__ import annotations

import threading
import time

import numpy as np

from runtime.core.records import ColumnBatch, ObjectBatch, Watermark
from runtime.taskmanager.network.partition import ResultPartition, estimate_nbytes


def _batch(i: int) -> ColumnBatch:
    return ColumnBatch({"i": np.array([i, i], dtype=np.int64)}, timestamps=np.array([1, 2], dtype=np.int64))


def test_a_producer_that_never_waits_is_not_backpressured() -> None:
    p = ResultPartition("p", 1, capacity_per_subpartition=4)
    for i in range(4):
        p.add(0, _batch(i))
    p.add(0, Watermark(5))  # events never block
    assert p.backpressured_ns() == 0
    assert p.bytes_out == 4 * (16 + 16)


def test_time_blocked_on_a_full_subpartition_is_counted_while_and_after_waiting() -> None:
    p = ResultPartition("p", 1, capacity_per_subpartition=1)
    view = p.create_view(0, lambda: None)
    p.add(0, _batch(0))
    producer = threading.Thread(target=p.add, args=(0, _batch(1)))
    producer.start()
    time.sleep(0.3)
    during = p.backpressured_ns()
    assert during >= 0.25e9, during  # the wait in progress counts before it ends
    view.poll()  # room: the producer continues
    producer.join(5)
    after = p.backpressured_ns()
    assert 0.25e9 <= after < 2e9 and after >= during
    time.sleep(0.05)
    assert p.backpressured_ns() == after  # no wait in progress: the counter stands still


def test_a_released_partition_ends_the_wait_and_keeps_the_count() -> None:
    p = ResultPartition("p", 1, capacity_per_subpartition=1)
    p.add(0, _batch(0))
    errors: list[BaseException] = []

    def produce() -> None:
        try:
            p.add(0, _batch(1))
        except BaseException as e:  # noqa: BLE001  # whatever ends the thread is handed to the test, which checks it
            errors.append(e)

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(0.1)
    p.release()
    t.join(5)
    assert errors and p.backpressured_ns() >= 0.05e9


def test_estimated_sizes() -> None:
    assert estimate_nbytes(ColumnBatch({"a": np.zeros(10, dtype=np.float64), "b": np.zeros(10, dtype=np.int32)})) == 120
    small, big = ObjectBatch([(1, "x")] * 10), ObjectBatch([(1, "x" * 1000)] * 10)
    assert 0 < estimate_nbytes(small) < estimate_nbytes(big)
    assert estimate_nbytes(ObjectBatch([])) == 0
