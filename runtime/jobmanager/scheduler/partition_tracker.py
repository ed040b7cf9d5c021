"""Committed blocking result partitions of one job (Flink: JobMasterPartitionTracker).

A producer that FINISHED reports the files of its blocking partitions; the scheduler commits them
to the result's Delta table (`runtime.storage.blocking_results.commit_partition`, on the I/O
thread) and records them here (main thread). A partition is consumable once recorded; consumers
are deployed with its files. Committed results survive their producer's TaskManager, so region
failover never re-runs a producer whose partitions are here.
"""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runtime.graph.execution_graph import ExecutionGraph
from runtime.rpc.deployment import BlockingFileSlice
from runtime.rpc.messages import ProducedBlockingPartition
from runtime.storage.blocking_results import result_table_uri


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

    def shutdown(self) -> None:
        self.io.shutdown(wait=False)

