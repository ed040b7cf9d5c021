"""Backpressure on a real cluster: a slow consumer bounds the producer's memory (credit-based flow control)."""
from __future__ import annotations

import time

import numpy as np
import pytest

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import JobExecutionError
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster

ROWS_PER_BATCH = 65_536
BATCHES = 700  # 700 x 1.5 MiB = ~1 GiB if nothing held the producer back


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def wide_batch(i: np.ndarray) -> dict[str, np.ndarray]:
    return {"a": i, "b": i * 2, "c": i * 3}


def slow(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    time.sleep(0.05)
    return batch


def test_slow_consumer_bounds_producer_memory(mini_cluster: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    src = DataGeneratorSource(None, ROWS_PER_BATCH * BATCHES, batch_generator=wide_batch, batch_size=ROWS_PER_BATCH)
    (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "fast source")
        .rebalance()
        .map_batches(slow)
        .slot_sharing_group("consumer")  # another slot, so another TaskManager: a remote channel
        .name("slow consumer")
        .print()
    )
    client = mini_cluster.submit(env.get_job_graph("backpressure"))
    tms = mini_cluster.wait_for_task_managers(2, timeout=30)
    peak = {tm.tm_id: 0.0 for tm in tms}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for tm in tms:
            peak[tm.tm_id] = max(peak[tm.tm_id], _rss_mib(tm.pid))
        time.sleep(0.05)
    # still running: the producer is held back, not finished (it would need ~35 s of consumer time)
    assert client.get_job_status() is JobStatus.RUNNING
    client.cancel()
    with pytest.raises(JobExecutionError):
        client.get_job_execution_result(timeout=30)
    # a few buffers in flight (capacity + credits), not the ~1 GiB an unbounded queue would hold
    print("peak RSS MiB per TaskManager:", peak)
    assert max(peak.values()) < 400, peak
