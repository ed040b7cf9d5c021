"""Committed blocking result partitions of one job (Flink: JobMasterPartitionTracker).

A producer that FINISHED reports the files of its blocking partitions; the scheduler commits them
to the result's Delta table (`runtime.storage.blocking_results.commit_partition`, on the I/O
thread) and records them here (main thread). A partition is consumable once recorded; consumers
are deployed with its files. Committed results survive their producer's TaskManager, so region
failover never re-runs a producer whose partitions are here.

They survive the JobManager too: a new leader that recovers a batch job (FLIP-383, batch job
recovery) reads what the results' tables hold (`recover`) and does not run again the regions whose
whole output is committed (`finished_regions`).
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph import ResultPartitionType
from runtime.graph.regions import PipelinedRegion
from runtime.rpc.deployment import BlockingFileSlice
from runtime.rpc.messages import ProducedBlockingPartition
from runtime.storage.blocking_results import committed_partitions, result_table_uri


class BlockingPartitionTracker:
    def __init__(self, execution_graph: ExecutionGraph, results_dir: str) -> None:
        self.eg = execution_graph
        self.results_dir = results_dir
        self._committed: dict[str, ProducedBlockingPartition] = {}
        self._attempts: dict[str, str] = {}  # partition id -> the producer attempt whose files were committed
        # partition id -> how often its committed files were found missing: the re-run producer's
        # commit is a new Delta transaction version of its app id (the lost one was version 1)
        self._generations: dict[str, int] = {}
        # commits to a result's table one at a time: producers finishing together must not race
        # (creating the table and appending to it concurrently conflict in Delta)
        self.io = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"blocking-results-{execution_graph.job_id[:8]}")

    def table_uri(self, dataset_id: str) -> str:
        return result_table_uri(self.results_dir, dataset_id)

    def is_committed(self, partition_id: str) -> bool:
        return partition_id in self._committed

    def mark_committed(self, produced: ProducedBlockingPartition, attempt_id: str) -> None:
        self._committed[produced.partition_id] = produced
        self._attempts[produced.partition_id] = attempt_id

    def invalidate(self, partition_id: str) -> bool:
        """A consumer could not read this committed partition (its files are gone): forget it, so its
        consumers wait for the producer to run again and that run's files are committed. False if it
        was not committed (already invalidated by another consumer's report)."""
        if self._committed.pop(partition_id, None) is None:
            return False
        self._attempts.pop(partition_id, None)
        self._generations[partition_id] = self._generations.get(partition_id, 0) + 1
        return True

    def committed_attempt(self, partition_id: str) -> str:
        return self._attempts.get(partition_id, "")

    def files_of(self, partition_id: str, subpartition: int) -> list[BlockingFileSlice]:
        """Where one subpartition is in the committed files, in the order the producer wrote it."""
        produced = self._committed[partition_id]
        return [BlockingFileSlice(path=f.path, row_groups=f.row_groups[subpartition]) for f in produced.files if subpartition in f.row_groups]

    def bytes_of_dataset(self, dataset_id: str) -> int:
        return sum(p.bytes for p in self._committed.values() if p.dataset_id == dataset_id)

    def __len__(self) -> int:
        return len(self._committed)

    async def commit(self, loop: asyncio.AbstractEventLoop, producer_subtask: int, attempt_id: str,
                     produced: list[ProducedBlockingPartition]) -> list[str]:
        """Commit what a FINISHED producer attempt wrote (one Delta transaction per result and subtask, on
        this tracker's I/O thread) and record it; the partition ids now committed. A partition committed
        before keeps its files and the attempt's are deleted. On failure the attempt's files are removed
        (unless the commit may have landed) and the error is raised: the producer must run again."""
        from runtime.storage.blocking_results import commit_partition, committed_files, delete_files
        from runtime.storage.delta_commit import CommitOutcomeUnknownError

        async def io(fn: Callable[..., Any], *args: Any) -> Any:
            return await loop.run_in_executor(self.io, fn, *args)

        committed: list[str] = []
        try:
            for p in produced:
                table = self.table_uri(p.dataset_id)
                if self.is_committed(p.partition_id):  # an earlier attempt's files are the result
                    await io(delete_files, table, [f.path for f in p.files])
                    continue
                if not await io(commit_partition, table, producer_subtask, p.files, 1 + self._generations.get(p.partition_id, 0)):
                    # committed before by an attempt this JobMaster does not remember: those files are the result
                    await io(delete_files, table, [f.path for f in p.files])
                    p = p.model_copy(update={"files": await io(committed_files, table, producer_subtask)})
                self.mark_committed(p, attempt_id)
                committed.append(p.partition_id)
        except Exception as e:
            if not isinstance(e, CommitOutcomeUnknownError):  # nothing references them (else a re-run's commit decides)
                for p in produced:
                    if not self.is_committed(p.partition_id):
                        await io(delete_files, self.table_uri(p.dataset_id), [f.path for f in p.files])
            raise
        return committed

    async def recover(self, loop: asyncio.AbstractEventLoop) -> tuple[list[str], list[str]]:
        """A new leader recovers the job: record every blocking partition its producers committed
        before the failover, as the results' Delta tables hold them (read on this tracker's I/O
        thread), each as its producer's current attempt's (never deployed: the scheduler marks it
        FINISHED or runs it). A partition whose committed files are gone is not recorded; its
        producer's next commit is the next generation. (committed, lost) partition ids."""
        blocking = [r for r in self.eg.results.values() if r.result_type is ResultPartitionType.BLOCKING]
        committed: list[str] = []
        lost: list[str] = []
        for result in blocking:
            held = await loop.run_in_executor(
                self.io, committed_partitions, self.table_uri(result.id), [p.producer.subtask_index for p in result.partitions]
            )
            for p in result.partitions:
                found = held.get(p.producer.subtask_index)
                if found is None:
                    continue
                if found.lost:
                    self._generations[p.partition_id] = found.generation
                    lost.append(p.partition_id)
                    continue
                self._generations[p.partition_id] = found.generation - 1  # what commit() would have committed it as
                produced = ProducedBlockingPartition(
                    partition_id=p.partition_id, dataset_id=result.id, files=found.files, bytes=found.payload_bytes
                )
                self.mark_committed(produced, self.eg.vertex(p.producer).current_execution.attempt_id)
                committed.append(p.partition_id)
        return committed, lost

    def finished_regions(self) -> list[PipelinedRegion]:
        """The regions whose whole work is in committed blocking partitions: every subtask produces a
        result, every blocking partition they produce is committed (the pipelined ones stay inside
        the region), and none of their operators but a source has a coordinator (a sink commits at the
        job's end what its subtasks reported; a subtask that does not run reports nothing; a FLIP-27
        source's enumerator only hands out splits to readers that ask, and these do not run). A recovered job
        does not run them again (Flink: BatchJobRecoveryHandler restoring finished vertices)."""

        def done(region: PipelinedRegion) -> bool:
            blocking = 0
            for vid in region.vertices:
                ev = self.eg.vertex(vid)
                if not ev.produced_partitions or any(op.coordinator_provider and not op.is_source for op in ev.job_vertex.operators):
                    return False
                for p in ev.produced_partitions.values():
                    if p.result_type is ResultPartitionType.BLOCKING:
                        if not self.is_committed(p.partition_id):
                            return False
                        blocking += 1
            return blocking > 0

        return [r for r in self.eg.regions if done(r)]

    def shutdown(self) -> None:
        self.io.shutdown(wait=False)

