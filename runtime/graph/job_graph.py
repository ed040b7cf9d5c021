"""JobGraph: what the client submits. Pydantic models, JSON-serializable.

User functions travel as cloudpickle bytes (base64 in JSON) and are only unpickled on the
JobManager (coordinators) and TaskManagers after the peer has been authenticated.
"""
from __future__ import annotations

import enum
import uuid
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.graph.transformations import PartitionerKind


class _Model(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64", extra="forbid")


class ResultPartitionType(str, enum.Enum):
    PIPELINED_BOUNDED = "PIPELINED_BOUNDED"  # streaming exchange with bounded buffers
    BLOCKING = "BLOCKING"  # fully produced before consumption (batch)

    @property
    def is_pipelined(self) -> bool:
        return self is ResultPartitionType.PIPELINED_BOUNDED

    @property
    def is_reconnectable(self) -> bool:
        """Flink: ResultPartitionType.isReconnectable (a consumer can re-read it after failover)."""
        return self is ResultPartitionType.BLOCKING


class DistributionPattern(str, enum.Enum):
    POINTWISE = "POINTWISE"
    ALL_TO_ALL = "ALL_TO_ALL"


class JobType(str, enum.Enum):
    STREAMING = "STREAMING"
    BATCH = "BATCH"


class PartitionerDescriptor(_Model):
    kind: PartitionerKind
    key_selector: bytes | None = None  # cloudpickle of a callable or a field name (HASH)


class ChainedOutput(_Model):
    target_node_id: int
    type_number: int = 0
    output_tag: str | None = None  # fed by the operator's side output of this tag (None: its main output)


class ChainedOperator(_Model):
    """One operator inside a vertex's chain."""

    node_id: int
    name: str
    uid: str | None = None
    # the id state is stored under in checkpoints and savepoints: stable across builds and chaining
    operator_id: str
    operator_factory: bytes  # cloudpickle of a zero-arg callable returning a StreamOperator
    num_inputs: int = 1
    is_source: bool = False
    is_sink: bool = False
    keyed: bool = False
    chained_outputs: list[ChainedOutput] = Field(default_factory=list)
    network_outputs: list[str] = Field(default_factory=list)  # dataset ids
    coordinator_provider: bytes | None = None


class IntermediateDataSet(_Model):
    id: str
    producer_vertex_id: str
    producer_node_id: int
    partitioner: PartitionerDescriptor
    result_type: ResultPartitionType = ResultPartitionType.PIPELINED_BOUNDED
    output_tag: str | None = None  # what the producer emits to this side output (None: its main output)


class JobEdge(_Model):
    dataset_id: str
    source_vertex_id: str
    target_vertex_id: str
    target_node_id: int
    type_number: int = 0
    distribution_pattern: DistributionPattern
    partitioner: PartitionerKind


class ResourceSpec(_Model):
    """Fine-grained resource requirement of an operator / slot sharing group (unknown = None)."""

    cpu_cores: float | None = None
    task_heap_mb: int | None = None
    managed_memory_mb: int | None = None
    task_off_heap_mb: int | None = None

    @staticmethod
    def sum(specs: list[ResourceSpec]) -> ResourceSpec:
        """Dimension by dimension; a dimension no spec sets stays unset."""
        def total(f: str) -> Any:
            values = [getattr(x, f) for x in specs if getattr(x, f) is not None]
            return sum(values) if values else None

        return ResourceSpec(**{f: total(f) for f in ResourceSpec.model_fields})

    def describe(self) -> str:
        parts = [f"{self.cpu_cores:g} CPU" if self.cpu_cores is not None else None]
        for f, label in (("task_heap_mb", "task heap"), ("task_off_heap_mb", "task off-heap"), ("managed_memory_mb", "managed memory")):
            v = getattr(self, f)
            parts.append(f"{v} MB {label}" if v else None)
        return ", ".join(p for p in parts if p) or "nothing"


class JobVertex(_Model):
    id: str
    name: str
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str = "default"
    operators: list[ChainedOperator]  # topological order within the chain
    inputs: list[JobEdge] = Field(default_factory=list)
    produced_datasets: list[IntermediateDataSet] = Field(default_factory=list)
    resources: ResourceSpec | None = None
    # adaptive batch: the scheduler decides the parallelism from the bytes of the (blocking) inputs
    # once they are committed; `parallelism` is the upper bound until then
    dynamic_parallelism: bool = False

    @property
    def operator_names(self) -> list[str]:
        return [op.name for op in self.operators]

    @property
    def is_input_vertex(self) -> bool:
        return not self.inputs


class JobGraph(_Model):
    job_id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    job_name: str
    job_type: JobType = JobType.STREAMING
    vertices: list[JobVertex]
    config: dict[str, str] = Field(default_factory=dict)
    # resources declared for a whole slot sharing group (PyFlink's SlotSharingGroup builder); a
    # group not listed needs the sum of its vertices' resources, or the UNKNOWN profile
    slot_sharing_group_resources: dict[str, ResourceSpec] = Field(default_factory=dict)

    def vertex(self, vertex_id: str) -> JobVertex:
        for v in self.vertices:
            if v.id == vertex_id:
                return v
        raise KeyError(f"job {self.job_id} has no vertex {vertex_id}")

    def dataset(self, dataset_id: str) -> IntermediateDataSet:
        for v in self.vertices:
            for d in v.produced_datasets:
                if d.id == dataset_id:
                    return d
        raise KeyError(f"job {self.job_id} has no intermediate dataset {dataset_id}")

    def consumers_of(self, dataset_id: str) -> list[JobEdge]:
        return [e for v in self.vertices for e in v.inputs if e.dataset_id == dataset_id]

    def topological_vertices(self) -> list[JobVertex]:
        by_id = {v.id: v for v in self.vertices}
        indeg = {v.id: len({e.source_vertex_id for e in v.inputs}) for v in self.vertices}
        consumers: dict[str, set[str]] = defaultdict(set)
        for v in self.vertices:
            for e in v.inputs:
                consumers[e.source_vertex_id].add(v.id)
        ready = [v.id for v in self.vertices if indeg[v.id] == 0]
        out: list[JobVertex] = []
        while ready:
            vid = ready.pop(0)
            out.append(by_id[vid])
            for c in sorted(consumers[vid]):
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        if len(out) != len(self.vertices):
            raise ValueError(f"job {self.job_id}: the JobGraph has a cycle")
        return out

    def group_resources(self) -> dict[str, ResourceSpec | None]:
        """Per slot sharing group (in vertex order): its declared resources, else the sum of its
        vertices' (Flink merges their ResourceSpecs), else None (UNKNOWN: a default slot)."""
        out: dict[str, ResourceSpec | None] = {}
        for v in self.vertices:
            g = v.slot_sharing_group
            if g in out:
                continue
            declared = self.slot_sharing_group_resources.get(g)
            if declared is not None:
                out[g] = declared
                continue
            specs = [m.resources for m in self.vertices if m.slot_sharing_group == g and m.resources is not None]
            out[g] = ResourceSpec.sum(specs) if specs else None
        return out

    def slots_per_group(self) -> dict[str, int]:
        """Slots each sharing group needs: its highest parallelism."""
        per_group: dict[str, int] = {}
        for v in self.vertices:
            per_group[v.slot_sharing_group] = max(per_group.get(v.slot_sharing_group, 0), v.parallelism)
        return per_group

    def slots_required(self) -> int:
        """Slots needed with slot sharing: per sharing group, its highest parallelism; summed."""
        return sum(self.slots_per_group().values())
