"""Checkpoints after tasks finish (FLIP-147): a bounded source beside an unbounded one.

Once the bounded source's tasks FINISHED, checkpoints go on (it is skipped and recorded as
finished); a failure after that restores from a checkpoint taken after it finished, the bounded
source is not run again, and the exactly-once Delta output equals the plain-Python reference
row for row. A Delta sink whose subtasks finished while the job goes on has its last files
committed by the next checkpoint, not only when the job ends.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.base import Source
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.operators.base import InputStatus, SourceOperator
from runtime.core.records import ColumnBatch
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.rpc import messages as m
from tests.integration.runtime.test_fault_tolerance import env_with_checkpoints, id_source, read_ids
from tests.waiting import job_details, wait_until

pytestmark = pytest.mark.integration

BOUNDED_OFFSET = 1_000_000  # the bounded source's ids: 1_000_000 + i, apart from the unbounded 0..N-1


class OffsetIds:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def __call__(self, i: np.ndarray) -> dict[str, np.ndarray]:
        return {"id": i + self.offset}


def bounded_source(n: int) -> DataGeneratorSource:
    return DataGeneratorSource(None, n, batch_generator=OffsetIds(BOUNDED_OFFSET))


class StatelessBoundedSource(Source):
    """Emits its share of BOUNDED_OFFSET + 0..n-1 and keeps no position (like a source function
    without checkpointed state): run again after a restore, it would emit everything again."""

    def __init__(self, n: int) -> None:
        self.n = n

    def create_operator(self) -> SourceOperator:
        return _StatelessBoundedReader(self.n)


class _StatelessBoundedReader(SourceOperator):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self._batches: list[np.ndarray] | None = None

    def emit_next(self) -> InputStatus:
        assert self.ctx is not None and self.output is not None
        if self._batches is None:
            mine = np.arange(self.ctx.subtask_index, self.n, self.ctx.parallelism, dtype=np.int64) + BOUNDED_OFFSET
            self._batches = np.array_split(mine, 10)
        if self._batches:
            self.output.emit(ColumnBatch({"id": self._batches.pop(0)}))
        return InputStatus.MORE_AVAILABLE if self._batches else InputStatus.END_OF_INPUT


class FailOnceArmed:
    """Raises once, at the first batch after the test created `arm` (a file every TaskManager sees)."""

    def __init__(self, arm: Path, marker: Path) -> None:
        self.arm, self.marker = str(arm), str(marker)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if os.path.exists(self.arm) and not os.path.exists(self.marker):
            try:  # created exclusively: of the subtasks that see the arm at once, only one fails
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return batch
            raise ValueError("injected failure after the bounded source finished")
        return batch


def statistics(cluster: MiniCluster, job_id: str) -> dict[str, Any]:
    stats = cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=job_id), timeout=10)
    return json.loads(stats.statistics_json)


def subtasks_of(cluster: MiniCluster, job_id: str, vertex_name: str) -> list[m.SubtaskDetails]:
    return [s for v in job_details(cluster, job_id).vertices if v.name == vertex_name for s in v.subtasks]


def wait_finished(cluster: MiniCluster, job_id: str, vertex_name: str) -> None:
    wait_until(
        lambda: all(s.state is ExecutionState.FINISHED for s in subtasks_of(cluster, job_id, vertex_name)),
        timeout=60, what=f"every subtask of '{vertex_name}' FINISHED", interval=0.05,
    )


def wait_more_checkpoints(cluster: MiniCluster, job_id: str, more: int, after: str) -> int:
    """Wait until `more` checkpoints completed after now; the id of the newest one then."""
    start = statistics(cluster, job_id)["counts"]["completed"]
    wait_until(lambda: statistics(cluster, job_id)["counts"]["completed"] >= start + more, timeout=30,
               what=f"{more} more completed checkpoints after {after}", interval=0.05)
    return statistics(cluster, job_id)["latest_completed"]["id"]


def test_checkpoints_go_on_after_a_bounded_source_finished_and_a_restore_does_not_replay_it(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n, n_bounded = 120_000, 5_000
    env = env_with_checkpoints(tmp_path, 2, interval_ms=200)
    bounded = env.from_source(StatelessBoundedSource(n_bounded), WatermarkStrategy.no_watermarks(), "bounded")
    unbounded = env.from_source(id_source(n, 10_000), WatermarkStrategy.no_watermarks(), "unbounded")
    (
        bounded.union(unbounded)
        .map_batches(FailOnceArmed(tmp_path / "arm", tmp_path / "failed-once"))
        .name("fail once armed")
        .sink_to(DeltaSink(str(tmp_path / "out")))
    )
    client = mini_cluster.submit(env.get_job_graph("bounded-beside-unbounded"))
    wait_finished(mini_cluster, client.job_id, "bounded")
    after_finish = wait_more_checkpoints(mini_cluster, client.job_id, 3, "the bounded source finished")
    assert job_details(mini_cluster, client.job_id).status is JobStatus.RUNNING, "the unbounded source outlasts the checkpoints"
    (tmp_path / "arm").touch()
    restored = wait_until(lambda: statistics(mini_cluster, client.job_id)["latest_restored"], timeout=60, what="a restore")
    assert restored >= after_finish, f"restored checkpoint {restored}, taken before the bounded source finished (>= {after_finish})"
    # the failed task's region (one of the two pipelines) restarted; its bounded subtask was
    # deployed as finished: it emitted nothing
    wait_finished(mini_cluster, client.job_id, "bounded")
    restarted = [s for s in subtasks_of(mini_cluster, client.job_id, "bounded") if s.attempt_number >= 1]
    assert restarted and all(s.metrics.records_out == 0 for s in restarted), restarted
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["restarts"] == 1 and (tmp_path / "failed-once").exists()
    expected = sorted([*range(n), *(BOUNDED_OFFSET + i for i in range(n_bounded))])
    got = read_ids(tmp_path / "out")
    assert got == expected, f"{len(got) - len(set(got))} duplicated, {len(set(expected) - set(got))} missing of {len(expected)}"


def test_a_finished_sinks_last_files_are_committed_by_the_next_checkpoint_and_survive_a_full_restart(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    """Two pipelines in one job: bounded -> Delta sink A, unbounded -> Delta sink B. A's subtasks
    finish while B runs: A's rows become visible with the next checkpoint. A failure then restarts
    every task (full failover): A is restored as finished, and both tables are exactly the reference."""
    n, n_bounded = 120_000, 5_000
    conf = Configuration()
    conf.set_string("jobmanager.execution.failover-strategy", "full")
    env = env_with_checkpoints(tmp_path, 2, interval_ms=200, conf=conf)
    env.from_source(bounded_source(n_bounded), WatermarkStrategy.no_watermarks(), "bounded").sink_to(DeltaSink(str(tmp_path / "a")))
    (
        env.from_source(id_source(n, 10_000), WatermarkStrategy.no_watermarks(), "unbounded")
        .map_batches(FailOnceArmed(tmp_path / "arm", tmp_path / "failed-once"))
        .name("fail once armed")
        .sink_to(DeltaSink(str(tmp_path / "b")))
    )
    client = mini_cluster.submit(env.get_job_graph("finished-sink-beside-running-one"))
    expected_a = [BOUNDED_OFFSET + i for i in range(n_bounded)]
    wait_until(lambda: (tmp_path / "a" / "_delta_log").exists() and read_ids(tmp_path / "a") == expected_a, timeout=30,
               what="sink A's rows committed", interval=0.05)
    # committed by a checkpoint, not by the job's final commit: checkpoints go on after that
    wait_more_checkpoints(mini_cluster, client.job_id, 2, "sink A's rows became visible (were they committed only at the job's end?)")
    (tmp_path / "arm").touch()
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    assert result.accumulators["restarts"] == 1 and (tmp_path / "failed-once").exists()
    assert read_ids(tmp_path / "a") == expected_a
    assert read_ids(tmp_path / "b") == list(range(n))
