"""Small builders of transformation programs and hand-made JobGraphs, shared by the graph, runtime and
scheduling unit tests."""
from __future__ import annotations

import functools
from typing import Any

from runtime.graph.job_graph import (
    ChainedOperator,
    DistributionPattern,
    IntermediateDataSet,
    JobEdge,
    JobGraph,
    JobVertex,
    PartitionerDescriptor,
    ResultPartitionType,
)
from runtime.graph.transformations import (
    ChainingStrategy,
    OneInputTransformation,
    PartitionerKind,
    PartitionerSpec,
    PartitionTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)


class DummyOperator:
    """Stands in for a StreamOperator; the graph layer never calls the factory."""

    def __init__(self, label: str) -> None:
        self.label = label


def factory(label: str) -> functools.partial[DummyOperator]:
    return functools.partial(DummyOperator, label)


def source(name: str = "Source: events", parallelism: int | None = None, **kw: Any) -> SourceTransformation:
    return SourceTransformation(name=name, parallelism=parallelism, operator_factory=factory(name), **kw)


def one(inp: Transformation, name: str = "Map", parallelism: int | None = None, **kw: Any) -> OneInputTransformation:
    return OneInputTransformation(name=name, input=inp, parallelism=parallelism, operator_factory=factory(name), **kw)


def sink(inp: Transformation, name: str = "Sink: out", parallelism: int | None = None, **kw: Any) -> OneInputTransformation:
    return one(inp, name, parallelism, is_sink=True, **kw)


def two(a: Transformation, b: Transformation, name: str = "CoMap", parallelism: int | None = None, **kw: Any) -> TwoInputTransformation:
    return TwoInputTransformation(
        name=name, input1=a, input2=b, parallelism=parallelism, operator_factory=factory(name), **kw
    )


def partition(inp: Transformation, kind: PartitionerKind, key: Any = None, explicit: bool = True, **kw: Any) -> PartitionTransformation:
    return PartitionTransformation(
        name=f"Partition({kind.value})", input=inp, partitioner=PartitionerSpec(kind, key, explicit), **kw
    )


def key_by(inp: Transformation, key: Any = "k") -> PartitionTransformation:
    return partition(inp, PartitionerKind.HASH, key)


def union(*inputs: Transformation) -> UnionTransformation:
    return UnionTransformation(name="Union", union_inputs=list(inputs))


def _op(node_id: int, name: str) -> ChainedOperator:
    return ChainedOperator(node_id=node_id, name=name, operator_id=f"node-{node_id}", operator_factory=b"x")


def hand_made_job_graph(
    vertices: list[tuple[str, int]],
    edges: list[tuple[str, str, DistributionPattern, ResultPartitionType]],
    kind: PartitionerKind | None = None,
) -> JobGraph:
    """A JobGraph from (name, parallelism) vertices and (producer, consumer, pattern, type) edges.

    Vertex ids are the names; dataset ids are "<producer>-><consumer>".
    """
    vs = {
        name: JobVertex(id=name, name=name, parallelism=p, max_parallelism=128, operators=[_op(i, name)])
        for i, (name, p) in enumerate(vertices)
    }
    for src, dst, pattern, rtype in edges:
        ds_id = f"{src}->{dst}"
        k = kind or (PartitionerKind.FORWARD if pattern is DistributionPattern.POINTWISE else PartitionerKind.HASH)
        vs[src].produced_datasets.append(
            IntermediateDataSet(
                id=ds_id,
                producer_vertex_id=src,
                producer_node_id=0,
                partitioner=PartitionerDescriptor(kind=k),
                result_type=rtype,
            )
        )
        vs[dst].inputs.append(
            JobEdge(
                dataset_id=ds_id,
                source_vertex_id=src,
                target_vertex_id=dst,
                target_node_id=0,
                distribution_pattern=pattern,
                partitioner=k,
            )
        )
    return JobGraph(job_name="hand-made", vertices=list(vs.values()))


__all__ = [
    "ChainingStrategy",
    "DummyOperator",
    "factory",
    "hand_made_job_graph",
    "key_by",
    "one",
    "partition",
    "sink",
    "source",
    "two",
    "union",
]
