"""Parallelism decided from the data (Flink: AdaptiveBatchScheduler's DefaultVertexParallelismDecider).

A batch vertex whose parallelism the user did not set (JobVertex.dynamic_parallelism) gets it when
every blocking result it reads is committed: the bytes it will read divided by
`execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task`, rounded up, clamped to
[`.min-parallelism`, `.max-parallelism`] (the latter defaults to the vertex's parallelism: the
job's default parallelism) and to the vertex's max parallelism (its key groups).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.options import batch as batch_options
from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph import JobVertex

if TYPE_CHECKING:
    from runtime.jobmanager.scheduler.partition_tracker import BlockingPartitionTracker

# the option keys under their old names (declared in runtime.core.options.batch)
AVG_DATA_VOLUME_KEY = batch_options.ADAPTIVE_AVG_DATA_VOLUME_PER_TASK.key
MIN_PARALLELISM_KEY = batch_options.ADAPTIVE_MIN_PARALLELISM.key
MAX_PARALLELISM_KEY = batch_options.ADAPTIVE_MAX_PARALLELISM.key
DEFAULT_AVG_DATA_VOLUME = batch_options.DEFAULT_AVG_DATA_VOLUME


class AdaptiveBatchOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    avg_data_volume_per_task: int = Field(DEFAULT_AVG_DATA_VOLUME, gt=0)
    min_parallelism: int = Field(1, ge=1)
    max_parallelism: int | None = Field(None, ge=1, description="None: the vertex's configured (default) parallelism")

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> AdaptiveBatchOptions:
        """Raises ConfigurationError naming the key of a malformed value."""
        return cls(
            avg_data_volume_per_task=batch_options.ADAPTIVE_AVG_DATA_VOLUME_PER_TASK.get(config),
            min_parallelism=batch_options.ADAPTIVE_MIN_PARALLELISM.get(config),
            max_parallelism=batch_options.ADAPTIVE_MAX_PARALLELISM.get(config),
        )

    def decide(self, input_bytes: int, upper_bound: int, max_parallelism: int) -> int:
        """The parallelism for a vertex reading `input_bytes` (upper_bound: its configured parallelism)."""
        high = min(self.max_parallelism or upper_bound, max_parallelism)
        wanted = -(-max(0, input_bytes) // self.avg_data_volume_per_task)  # ceil
        return max(1, min(high, max(self.min_parallelism, wanted)))


class AdaptiveBatchDecider:
    """The scheduler's part (main thread): which dynamic vertices can be decided, and deciding them."""

    def __init__(self, execution_graph: ExecutionGraph, partitions: BlockingPartitionTracker, config: dict[str, str]) -> None:
        self.eg = execution_graph
        self.partitions = partitions
        self.options = AdaptiveBatchOptions.from_config(config)
        # the parallelism each dynamic vertex was compiled with: its upper bound
        self._bound = {jv.id: jv.parallelism for jv in execution_graph.job_graph.vertices if jv.dynamic_parallelism}

    def decide_ready(self) -> list[tuple[JobVertex, int, int, int]]:
        """Decide every undecided dynamic vertex whose inputs are all committed, and give the execution
        graph its subtasks; (vertex, parallelism, input bytes, bound) of each."""
        out = []
        for jv_id, bound in list(self._bound.items()):
            jv = self.eg.job_vertex(jv_id).job_vertex
            inputs = [self.eg.results[e.dataset_id] for e in jv.inputs]
            if not all(self.partitions.is_committed(p.partition_id) for r in inputs for p in r.partitions):
                continue
            volume = sum(self.partitions.bytes_of_dataset(r.id) for r in inputs)
            parallelism = self.options.decide(volume, bound, jv.max_parallelism)
            del self._bound[jv_id]
            if parallelism != jv.parallelism:
                self.eg.set_parallelism(jv_id, parallelism)
            out.append((jv, parallelism, volume, bound))
        return out

