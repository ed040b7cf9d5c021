"""Batch job recovery (Flink 1.20's FLIP-383): a new leader keeps the blocking results a batch job
committed before the failover and runs again only the regions that had not finished.

The scenario: a batch job (source stage -> blocking hash exchange -> keyed sum -> Delta sink) runs on
a MiniCluster; its JobMaster is suspended (leadership lost: SUSPENDED keeps the blocking results) at
a moment found by polling the job's details; then the Dispatcher starts the same job graph as a new
leader would (`_start_job(job_graph, recovered=True)`). Every producer attempt that runs leaves a
marker file (the function's open()), so the test counts which producers ran again.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import Configuration, Types, WatermarkStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.functions import MapFunction
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.job_client import DispatcherJobClient
from runtime.deploy.minicluster import MiniCluster
from runtime.graph.job_graph import JobGraph
from runtime.rest.models import job_details as rest_job_details
from runtime.rpc import gateways as gw
from runtime.rpc import messages as m

pytestmark = pytest.mark.integration

KEYS = 13
WAIT_S = 60.0


class MarkRuns(MapFunction):
    """The producer stage: leaves a marker per attempt that runs; subtask `hold` waits for `release` first."""

    def __init__(self, marks: str, hold: int | None = None) -> None:
        self.marks, self.hold = marks, hold

    def open(self, ctx: Any) -> None:
        self.subtask = ctx.get_index_of_this_subtask()
        Path(self.marks, f"producer-{self.subtask}-{uuid.uuid4().hex}").touch()

    def map(self, value: tuple[int, int]) -> tuple[int, int]:
        if self.subtask == self.hold:
            wait_for(Path(self.marks, "release"))
        return value


class WaitForRelease(MapFunction):
    """The consumer stage, after the keyed sum: emits nothing until `release` exists (the first run is
    suspended while it waits; the recovered run finds the file)."""

    def __init__(self, marks: str) -> None:
        self.marks = marks

    def map(self, value: tuple[int, int]) -> dict[str, int]:
        wait_for(Path(self.marks, "release"))
        return {"k": value[0], "v": value[1]}


def wait_for(path: Path) -> None:
    deadline = time.monotonic() + WAIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {WAIT_S:.0f}s")
        time.sleep(0.02)


def build_job(tmp_path: Path, n: int, hold: int | None = None) -> JobGraph:
    c = Configuration()
    c.set_string("execution.runtime-mode", "BATCH")
    c.set_string("execution.batch.blocking-results.dir", str(tmp_path / "blocking"))
    env = StreamExecutionEnvironment.get_execution_environment(c)
    env.set_parallelism(2)
    marks = str(tmp_path / "marks")
    os.makedirs(marks, exist_ok=True)
    pair = Types.TUPLE([Types.LONG(), Types.LONG()])
    source = DataGeneratorSource(lambda i: (i % KEYS, i), n, pair)
    summed = (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "numbers")
        .map(MarkRuns(marks, hold), output_type=pair).name("mark runs")
        .key_by(lambda r: r[0]).sum(1)
    )
    row = Types.ROW_NAMED(["k", "v"], [Types.LONG(), Types.LONG()])
    summed.map(WaitForRelease(marks), output_type=row).sink_to(DeltaSink.for_path(str(tmp_path / "out")))
    return env.get_job_graph("batch recovery")


def reference(n: int) -> list[tuple[int, int]]:
    sums: dict[int, int] = {}
    for i in range(n):
        sums[i % KEYS] = sums.get(i % KEYS, 0) + i
    return sorted(sums.items())


def output(tmp_path: Path) -> list[tuple[int, int]]:
    from deltalake import DeltaTable

    return sorted((r["k"], r["v"]) for r in DeltaTable(str(tmp_path / "out")).to_pyarrow_table().to_pylist())


def producer_runs(tmp_path: Path) -> list[int]:
    """How many attempts of each producer subtask ran (their markers)."""
    names = [p.name for p in (tmp_path / "marks").glob("producer-*")]
    return [sum(1 for name in names if name.startswith(f"producer-{i}-")) for i in range(2)]


def details(cluster: MiniCluster, job_id: str) -> m.JobDetailsMessage:
    return cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=10)


def poll(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.05)


def suspend_and_recover(cluster: MiniCluster, tmp_path: Path, job_graph: JobGraph, job_id: str) -> m.JobResultMessage:
    """The JobMaster loses its leadership (SUSPENDED: nothing deleted); the blocked tasks may go on
    once `release` exists; then the Dispatcher recovers the job as a new leader does."""
    dispatcher = cluster.dispatcher
    assert dispatcher is not None and cluster.rpc is not None
    jm = dispatcher.jobs[job_id].job_master
    jm.run_async(jm.suspend("test: this JobManager lost its leadership")).result(timeout=10)
    endpoint = gw.job_master_endpoint(job_id)
    rpc = cluster.rpc
    poll("the suspended JobMaster stopped", lambda: job_id not in dispatcher.jobs and rpc.endpoint(endpoint) is None)
    assert jm.scheduler.status.state is JobStatus.SUSPENDED
    assert any((tmp_path / "blocking" / job_id).iterdir()), "a suspended job keeps its blocking results"
    (tmp_path / "marks" / "release").touch()
    # the graph as the job graph store holds it (a fresh copy: a run changes adaptive parallelism in place)
    recovered = JobGraph.model_validate_json(job_graph.model_dump_json())
    dispatcher.run_async(dispatcher._start_job(recovered, recovered=True)).result(timeout=60)
    return DispatcherJobClient(cluster.dispatcher_gateway(), job_id).get_job_execution_result(timeout=120)


def test_a_recovered_batch_job_keeps_committed_results_and_does_not_rerun_their_producers(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 20_000
    job_graph = build_job(tmp_path, n)
    job_id = mini_cluster.submit_job(JobGraph.model_validate_json(job_graph.model_dump_json()))

    def consumer_running() -> bool:
        producers, consumers = details(mini_cluster, job_id).vertices
        return all(s.state is ExecutionState.FINISHED for s in producers.subtasks) and all(
            s.state is ExecutionState.RUNNING for s in consumers.subtasks
        )

    # lazily scheduled: the consumer runs only once every producer's partitions are committed
    poll("the producers committed and the consumer runs", consumer_running)
    assert producer_runs(tmp_path) == [1, 1]

    result = suspend_and_recover(mini_cluster, tmp_path, job_graph, job_id)
    assert result.status is JobStatus.FINISHED, result.error
    assert output(tmp_path) == reference(n)
    assert producer_runs(tmp_path) == [1, 1], "a producer whose results were committed ran again"
    producers, consumers = details(mini_cluster, job_id).vertices
    # FINISHED without a new attempt and without being deployed; the consumer ran
    assert [(s.state, s.attempt_number) for s in producers.subtasks] == [(ExecutionState.FINISHED, 0)] * 2
    assert all("DEPLOYING" not in s.state_timestamps_ms and not s.tm_id for s in producers.subtasks)
    assert all(s.state is ExecutionState.FINISHED and "DEPLOYING" in s.state_timestamps_ms for s in consumers.subtasks)
    assert not (tmp_path / "blocking" / job_id).exists(), "the finished job's blocking results are removed"


def test_a_recovered_batch_job_reruns_only_the_producer_that_had_not_committed(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 20_000
    job_graph = build_job(tmp_path, n, hold=1)
    job_id = mini_cluster.submit_job(JobGraph.model_validate_json(job_graph.model_dump_json()))

    def first_committed() -> bool:
        regions = rest_job_details(details(mini_cluster, job_id), 0).model_dump(by_alias=True)["regions"]
        return any(r["blocking-inputs-committed"] > 0 for r in regions)

    # producer 1 runs and waits for `release`
    poll("producer 0 committed its partition and producer 1 runs", lambda: first_committed() and producer_runs(tmp_path) == [1, 1])

    result = suspend_and_recover(mini_cluster, tmp_path, job_graph, job_id)
    assert result.status is JobStatus.FINISHED, result.error
    assert output(tmp_path) == reference(n)
    assert producer_runs(tmp_path) == [1, 2], "only the producer without committed results runs again"
    kept, rerun = details(mini_cluster, job_id).vertices[0].subtasks
    assert (kept.state, kept.attempt_number, "DEPLOYING" in kept.state_timestamps_ms) == (ExecutionState.FINISHED, 0, False)
    assert (rerun.state, rerun.attempt_number, "DEPLOYING" in rerun.state_timestamps_ms) == (ExecutionState.FINISHED, 0, True)


def test_what_a_new_leader_reads_of_a_result_table(tmp_path: Path) -> None:
    """`committed_partitions`, per producer subtask: its newest file that is there, with the payload
    bytes adaptive batch decides from; an empty commit is committed; lost files say so (no cluster)."""
    from runtime.storage.blocking_results import BlockingResultWriter, commit_partition, committed_partitions, delete_files

    table = str(tmp_path / "result")

    def write(subtask: int, payloads: list[bytes]) -> tuple[list[Any], int]:
        w = BlockingResultWriter(table, subtask, uuid.uuid4().hex, 4)
        for i, p in enumerate(payloads):
            w.write(i % 4, p)
        return w.close(), w.bytes_written

    assert committed_partitions(table, range(5)) == {}  # no table yet
    files0, bytes0 = write(0, [b"a" * 10, b"b" * 20, b"c" * 5])
    assert commit_partition(table, 0, files0)
    assert commit_partition(table, 1, [])  # wrote nothing
    files2, _ = write(2, [b"x"])
    assert commit_partition(table, 2, files2)
    delete_files(table, [f.path for f in files2])  # lost after its commit
    lost3, _ = write(3, [b"old"])
    assert commit_partition(table, 3, lost3)
    delete_files(table, [f.path for f in lost3])
    files3, bytes3 = write(3, [b"new", b"newer"])
    assert commit_partition(table, 3, files3, generation=2)  # its re-run after the loss
    write(4, [b"never committed"])

    got = committed_partitions(table, range(5))
    assert sorted(got) == [0, 1, 2, 3]
    assert (got[0].files, got[0].payload_bytes, got[0].generation, got[0].lost) == (files0, bytes0, 1, False)
    assert (got[1].files, got[1].lost) == ([], False)
    assert (got[2].files, got[2].lost, got[2].generation) == ([], True, 1)
    assert (got[3].files, got[3].payload_bytes, got[3].generation, got[3].lost) == (files3, bytes3, 2, False)
