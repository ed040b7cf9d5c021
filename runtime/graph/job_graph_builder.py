"""StreamGraph -> JobGraph: operator chaining into JobVertices, one IntermediateDataSet per network edge.

Port of Flink's StreamingJobGraphGenerator (isChainable, createChain, connect), extended with the
"TwoInputStreamOperator at any position in chain" rule: a multi-input operator joins a chain when
every one of its inputs is a chainable edge from that same chain, so the chain becomes a DAG.
"""
from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import cloudpickle

from runtime.core.execution_modes import RuntimeExecutionMode
from runtime.core.options import batch as batch_options
from runtime.core.options import execution as execution_options
from runtime.graph.job_graph import (
    ChainedOperator,
    ChainedOutput,
    DistributionPattern,
    IntermediateDataSet,
    JobEdge,
    JobGraph,
    JobType,
    JobVertex,
    PartitionerDescriptor,
    ResourceSpec,
    ResultPartitionType,
)
from runtime.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from runtime.graph.transformations import ChainingStrategy, ExchangeMode, PartitionerKind

CHAINING_CONFIG_KEY = execution_options.OPERATOR_CHAINING.key  # the option's key under its old name
# fixed namespace so vertex / dataset ids are the same every time a program is compiled
_NAMESPACE = uuid.UUID("6c1f0b0e-5f7e-4c57-9a55-6d696c6c7261")


def chaining_enabled(config: Mapping[str, Any]) -> bool:
    """`pipeline.operator-chaining: false` disables chaining for the whole job (Flink's option)."""
    return execution_options.OPERATOR_CHAINING.get(config)


def is_chainable_edge(edge: StreamEdge, graph: StreamGraph) -> bool:
    """Every condition of Flink's StreamingJobGraphGenerator.isChainable except the single-input one."""
    up, down = graph.nodes[edge.source_id], graph.nodes[edge.target_id]
    return (
        edge.partitioner.kind is PartitionerKind.FORWARD
        and edge.exchange_mode is not ExchangeMode.BATCH
        and up.parallelism == down.parallelism
        and up.slot_sharing_group == down.slot_sharing_group
        and up.chaining_strategy is not ChainingStrategy.NEVER
        and down.chaining_strategy is ChainingStrategy.ALWAYS
        and chaining_enabled(graph.config)
    )


class _UnionFind:
    def __init__(self, items: list[int]) -> None:
        self._parent = {i: i for i in items}

    def find(self, x: int) -> int:
        while self._parent[x] != x:
            self._parent[x] = self._parent[self._parent[x]]  # path halving
            x = self._parent[x]
        return x

    def union(self, head: int, member: int) -> None:
        # the chain keeps the root of `head` so the root is always the chain's head node
        self._parent[self.find(member)] = self.find(head)


def compute_chains(graph: StreamGraph) -> dict[int, list[StreamNode]]:
    """Chain head node id -> the chain's nodes in topological order."""
    order = graph.topological_order()
    if len(order) != len(graph.nodes):
        raise ValueError(f"job '{graph.job_name}': the StreamGraph has a cycle")
    uf = _UnionFind([n.id for n in order])
    for node in order:  # topological: every upstream's chain is final when we look at it
        edges = node.in_edges
        if not edges or not all(is_chainable_edge(e, graph) for e in edges):
            continue
        roots = {uf.find(e.source_id) for e in edges}
        if len(roots) == 1:  # single input, or all inputs from one chain (DAG chain)
            uf.union(roots.pop(), node.id)
    chains: dict[int, list[StreamNode]] = defaultdict(list)
    for node in order:
        chains[uf.find(node.id)].append(node)
    return dict(chains)


def _vertex_id(job_name: str, head: StreamNode) -> str:
    return uuid.uuid5(_NAMESPACE, f"vertex/{job_name}/{head.id}/{head.uid or ''}").hex


def _dataset_id(vertex_id: str, edge: StreamEdge, occurrence: int) -> str:
    # `occurrence` tells apart parallel edges with the same edge_id (e.g. a stream unioned with itself)
    return uuid.uuid5(_NAMESPACE, f"dataset/{vertex_id}/{edge.edge_id}/{occurrence}").hex


def _as_spec(r: Any) -> ResourceSpec:
    if isinstance(r, ResourceSpec):
        return r
    if isinstance(r, Mapping):
        return ResourceSpec.model_validate(dict(r))
    # duck-typed resource object from the API layer
    return ResourceSpec(**{f: getattr(r, f, None) for f in ResourceSpec.model_fields})


def _slot_sharing_group_resources(stream_graph: StreamGraph) -> dict[str, ResourceSpec]:
    """Resources per slot sharing group, summed over its operators' distinct declarations.

    A SlotSharingGroup's resources belong to the group, but the API stores them on every operator
    put into the group (the PyFlink pattern names the same group on several operators): equal
    declarations count once, so the group is not multiplied by the number of its operators.
    Different operator-level specs in one group add up (Flink: SlotSharingGroup merges the
    ResourceSpecs of its vertices).
    """
    distinct: dict[str, list[ResourceSpec]] = defaultdict(list)
    for n in stream_graph.nodes.values():
        if n.resources is None:
            continue
        spec = _as_spec(n.resources)
        if spec not in distinct[n.slot_sharing_group]:
            distinct[n.slot_sharing_group].append(spec)
    return {group: _sum_specs(specs) for group, specs in distinct.items()}


def _sum_specs(specs: list[ResourceSpec]) -> ResourceSpec:
    merged: dict[str, Any] = {}
    for f in ResourceSpec.model_fields:
        values = [getattr(s, f) for s in specs if getattr(s, f) is not None]
        merged[f] = sum(values) if values else None
    return ResourceSpec(**merged)


def _merge_resources(nodes: list[StreamNode]) -> ResourceSpec | None:
    """Flink's ResourceSpec.merge over the chain: sum what is known; unknown stays unknown."""
    specs = [_as_spec(n.resources) for n in nodes if n.resources is not None]
    return _sum_specs(specs) if specs else None


ADAPTIVE_ENABLED_KEY = batch_options.ADAPTIVE_AUTO_PARALLELISM_ENABLED.key  # the option's key under its old name
# exchanges a consumer of any parallelism can read as ranges of key-group subpartitions
_RANGE_READABLE = frozenset({PartitionerKind.HASH, PartitionerKind.REBALANCE, PartitionerKind.SHUFFLE})


def _adaptive(stream_graph: StreamGraph, nodes: list[StreamNode], inputs: list[JobEdge], datasets: dict[str, IntermediateDataSet], vid: str) -> bool:
    """Whether the adaptive batch scheduler decides this vertex's parallelism (Flink: a vertex whose
    parallelism the user did not set). Here: every operator's parallelism is the default, every
    input is a blocking all-to-all exchange read by key-group ranges (hash, rebalance, shuffle),
    and it produces no exchange of its own (the last stage of a job)."""
    if not batch_options.ADAPTIVE_AUTO_PARALLELISM_ENABLED.get(stream_graph.config):
        return False
    if not inputs or any(n.parallelism_configured for n in nodes):
        return False
    if any(d.producer_vertex_id == vid for d in datasets.values()):
        return False
    return all(
        datasets[e.dataset_id].result_type is ResultPartitionType.BLOCKING and e.distribution_pattern is DistributionPattern.ALL_TO_ALL
        and datasets[e.dataset_id].partitioner.kind in _RANGE_READABLE
        for e in inputs
    )


def build_job_graph(stream_graph: StreamGraph, job_id: str | None = None) -> JobGraph:
    """Chain operators and wire the network exchanges (Flink's StreamingJobGraphGenerator.createJobGraph)."""
    chains = compute_chains(stream_graph)
    chain_of: dict[int, int] = {n.id: head for head, nodes in chains.items() for n in nodes}
    vertex_ids = {head: _vertex_id(stream_graph.job_name, stream_graph.nodes[head]) for head in chains}
    batch = stream_graph.runtime_mode.upper() == "BATCH"

    # network edges first, so operators can name the datasets they write
    datasets: dict[str, IntermediateDataSet] = {}
    dataset_of_edge: dict[int, str] = {}  # id(StreamEdge) -> dataset id
    occurrences: dict[str, int] = defaultdict(int)
    inputs_of: dict[int, list[JobEdge]] = defaultdict(list)
    for head, nodes in chains.items():
        for node in nodes:
            for e in node.out_edges:
                if chain_of[e.target_id] == head:
                    continue  # chained: a direct call, no dataset
                producer_vid = vertex_ids[head]
                ds_id = _dataset_id(producer_vid, e, occurrences[e.edge_id])
                occurrences[e.edge_id] += 1
                kind = e.partitioner.kind
                selector = e.partitioner.key_selector
                datasets[ds_id] = IntermediateDataSet(
                    id=ds_id,
                    producer_vertex_id=producer_vid,
                    producer_node_id=node.id,
                    partitioner=PartitionerDescriptor(
                        kind=kind, key_selector=cloudpickle.dumps(selector) if selector is not None else None
                    ),
                    result_type=(
                        ResultPartitionType.BLOCKING
                        if e.exchange_mode is ExchangeMode.BATCH or batch
                        else ResultPartitionType.PIPELINED_BOUNDED
                    ),
                    output_tag=e.output_tag,
                )
                dataset_of_edge[id(e)] = ds_id
                inputs_of[chain_of[e.target_id]].append(
                    JobEdge(
                        dataset_id=ds_id,
                        source_vertex_id=producer_vid,
                        target_vertex_id=vertex_ids[chain_of[e.target_id]],
                        target_node_id=e.target_id,
                        type_number=e.type_number,
                        distribution_pattern=(
                            DistributionPattern.POINTWISE if kind.is_pointwise else DistributionPattern.ALL_TO_ALL
                        ),
                        partitioner=kind,
                    )
                )

    vertices: list[JobVertex] = []
    # `chains` is keyed in topological order of the heads (a head precedes its chain's members)
    for head, nodes in chains.items():
        operators = [
            ChainedOperator(
                node_id=n.id,
                name=n.name,
                uid=n.uid,
                operator_id=n.operator_id or f"node-{n.id}",  # hand-built StreamGraphs (tests) may have none
                operator_factory=cloudpickle.dumps(n.operator_factory),
                num_inputs=n.num_inputs,
                is_source=n.is_source,
                is_sink=n.is_sink,
                keyed=n.keyed,
                chained_outputs=[
                    ChainedOutput(target_node_id=e.target_id, type_number=e.type_number, output_tag=e.output_tag)
                    for e in n.out_edges
                    if chain_of[e.target_id] == head
                ],
                network_outputs=[dataset_of_edge[id(e)] for e in n.out_edges if chain_of[e.target_id] != head],
                coordinator_provider=(
                    cloudpickle.dumps(n.coordinator_provider) if n.coordinator_provider is not None else None
                ),
            )
            for n in nodes
        ]
        head_node = stream_graph.nodes[head]
        vid = vertex_ids[head]
        vertices.append(
            JobVertex(
                id=vid,
                name=" -> ".join(n.name for n in nodes),
                parallelism=head_node.parallelism,
                max_parallelism=head_node.max_parallelism,  # Flink: the chain head's
                slot_sharing_group=head_node.slot_sharing_group,
                operators=operators,
                inputs=inputs_of.get(head, []),
                produced_datasets=[d for d in datasets.values() if d.producer_vertex_id == vid],
                resources=_merge_resources(nodes),
                dynamic_parallelism=batch and _adaptive(stream_graph, nodes, inputs_of.get(head, []), datasets, vid),
            )
        )

    kwargs: dict[str, Any] = {}
    if job_id is not None:
        kwargs["job_id"] = job_id
    return JobGraph(
        job_name=stream_graph.job_name,
        job_type=JobType.BATCH if batch else JobType.STREAMING,
        vertices=vertices,
        # the resolved mode (AUTOMATIC decided): operators with batch semantics read it
        config={
            **{k: _config_str(v) for k, v in stream_graph.config.items()},
            execution_options.RUNTIME_MODE.key: (RuntimeExecutionMode.BATCH if batch else RuntimeExecutionMode.STREAMING).value,
        },
        slot_sharing_group_resources=_slot_sharing_group_resources(stream_graph),
        **kwargs,
    )


def _config_str(value: Any) -> str:
    # JobGraph.config is str -> str; booleans the way Flink's configuration spells them
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
