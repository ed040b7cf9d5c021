"""StreamGraph: one node per (non-virtual) operator, edges carry partitioner and input index."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runtime.graph.transformations import ChainingStrategy, ExchangeMode, PartitionerSpec


@dataclass
class StreamEdge:
    source_id: int
    target_id: int
    type_number: int  # which input of the target: 0 (one-input / first) or 1 (second)
    partitioner: PartitionerSpec
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED
    output_tag: str | None = None  # a side output of the source operator (Flink: StreamEdge.outputTag); None: its main output

    @property
    def edge_id(self) -> str:
        return f"{self.source_id}->{self.target_id}#{self.type_number}"


@dataclass
class StreamNode:
    id: int
    name: str
    operator_factory: Callable[[], Any]
    parallelism: int
    max_parallelism: int
    slot_sharing_group: str = "default"
    parallelism_configured: bool = False  # set by the user on the operator (else the default: adaptive batch may decide it)
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    uid: str | None = None
    uid_hash: str | None = None
    operator_id: str | None = None  # set by the StreamGraph generator (runtime.graph.operator_ids)
    num_inputs: int = 1
    is_source: bool = False
    is_sink: bool = False
    keyed: bool = False
    output_type: Any = None
    coordinator_provider: Any = None
    resources: Any = None
    in_edges: list[StreamEdge] = field(default_factory=list)
    out_edges: list[StreamEdge] = field(default_factory=list)


@dataclass
class StreamGraph:
    job_name: str
    nodes: dict[int, StreamNode] = field(default_factory=dict)
    runtime_mode: str = "STREAMING"  # or BATCH
    max_parallelism: int = 128
    config: dict[str, Any] = field(default_factory=dict)

    def add_edge(self, edge: StreamEdge) -> None:
        self.nodes[edge.source_id].out_edges.append(edge)
        self.nodes[edge.target_id].in_edges.append(edge)

    @property
    def sources(self) -> list[StreamNode]:
        return [n for n in self.nodes.values() if n.is_source]

    def topological_order(self) -> list[StreamNode]:
        indeg = {nid: len(n.in_edges) for nid, n in self.nodes.items()}
        ready = sorted(nid for nid, d in indeg.items() if d == 0)
        out: list[StreamNode] = []
        while ready:
            nid = ready.pop(0)
            out.append(self.nodes[nid])
            for e in self.nodes[nid].out_edges:
                indeg[e.target_id] -= 1
                if indeg[e.target_id] == 0:
                    ready.append(e.target_id)
        return out
