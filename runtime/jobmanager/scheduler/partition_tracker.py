"""Committed blocking result partitions of one job (Flink: JobMasterPartitionTracker).

A producer that FINISHED reports the files of its blocking partitions; the scheduler commits them
to the result's Delta table (`runtime.storage.blocking_results.commit_partition`, on the I/O
thread) and records them here (main thread). A partition is consumable once recorded; consumers
are deployed with its files. Committed results survive their producer's TaskManager, so region
failover never re-runs a producer whose partitions are here.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

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

    def shutdown(self) -> None:
        self.io.shutdown(wait=False)

