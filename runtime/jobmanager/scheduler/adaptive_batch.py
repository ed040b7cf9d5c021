"""Parallelism decided from the data (Flink: AdaptiveBatchScheduler's DefaultVertexParallelismDecider).

A batch vertex whose parallelism the user did not set (JobVertex.dynamic_parallelism) gets it when
every blocking result it reads is committed: the bytes it will read divided by
`execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task`, rounded up, clamped to
[`.min-parallelism`, `.max-parallelism`] (the latter defaults to the vertex's parallelism: the
job's default parallelism) and to the vertex's max parallelism (its key groups).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.errors import ConfigurationError
from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph import JobVertex

if TYPE_CHECKING:
    from runtime.jobmanager.scheduler.partition_tracker import BlockingPartitionTracker

AVG_DATA_VOLUME_KEY = "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task"
MIN_PARALLELISM_KEY = "execution.batch.adaptive.auto-parallelism.min-parallelism"
MAX_PARALLELISM_KEY = "execution.batch.adaptive.auto-parallelism.max-parallelism"
DEFAULT_AVG_DATA_VOLUME = 16 * 1024 * 1024  # Flink's default: 16 mb

_UNITS = {"b": 1, "bytes": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30}


def parse_memory_size(raw: str, key: str) -> int:
    """Flink's MemorySize: '16 mb', '512kb', '1g' or a number of bytes."""
    text = str(raw).strip().lower().replace(" ", "")
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(digits):] or "b"
    if not digits or unit not in _UNITS:
        raise ConfigurationError(f"{key}: {raw!r} is not a memory size (e.g. '16 mb', '512 kb' or a number of bytes)")
    try:
        value = int(float(digits) * _UNITS[unit])
    except ValueError:
        raise ConfigurationError(f"{key}: {raw!r} is not a memory size (e.g. '16 mb', '512 kb' or a number of bytes)") from None
    if value <= 0:
        raise ConfigurationError(f"{key}: must be positive, got {raw!r}")
    return value


class AdaptiveBatchOptions(BaseModel):
    model_config = ConfigDict(frozen=True)

    avg_data_volume_per_task: int = Field(DEFAULT_AVG_DATA_VOLUME, gt=0)
    min_parallelism: int = Field(1, ge=1)
    max_parallelism: int | None = Field(None, ge=1, description="None: the vertex's configured (default) parallelism")

    @classmethod
    def from_config(cls, config: dict[str, str]) -> "AdaptiveBatchOptions":
        def positive_int(key: str) -> int | None:
            raw = config.get(key)
            if raw is None or str(raw).strip() == "":
                return None
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ConfigurationError(f"{key}: {raw!r} is not a whole number") from None
            if value < 1:
                raise ConfigurationError(f"{key}: must be at least 1, got {value}")
            return value

        volume = config.get(AVG_DATA_VOLUME_KEY)
        return cls(
            avg_data_volume_per_task=parse_memory_size(volume, AVG_DATA_VOLUME_KEY) if volume else DEFAULT_AVG_DATA_VOLUME,
            min_parallelism=positive_int(MIN_PARALLELISM_KEY) or 1,
            max_parallelism=positive_int(MAX_PARALLELISM_KEY),
        )

    def decide(self, input_bytes: int, upper_bound: int, max_parallelism: int) -> int:
        """The parallelism for a vertex reading `input_bytes` (upper_bound: its configured parallelism)."""
        high = min(self.max_parallelism or upper_bound, max_parallelism)
        wanted = -(-max(0, input_bytes) // self.avg_data_volume_per_task)  # ceil
        return max(1, min(high, max(self.min_parallelism, wanted)))


class AdaptiveBatchDecider:
    """The scheduler's part (main thread): which dynamic vertices can be decided, and deciding them."""

    def __init__(self, execution_graph: ExecutionGraph, partitions: "BlockingPartitionTracker", config: dict[str, str]) -> None:
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

