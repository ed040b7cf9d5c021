"""Transformations -> StreamGraph, with the program checks Flink does at compile time.

Port of Flink's StreamGraphGenerator (transform / determineSlotSharingGroup) and the edge part of
StreamGraph.addEdgeInternal (virtual partition / union nodes, default partitioner).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runtime.core.errors import InvalidProgramError
from runtime.graph.operator_ids import assign_operator_ids
from runtime.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from runtime.graph.transformations import (
    ExchangeMode,
    OneInputTransformation,
    PartitionerKind,
    PartitionerSpec,
    PartitionTransformation,
    SideOutputTransformation,
    SourceTransformation,
    Transformation,
    TwoInputTransformation,
    UnionTransformation,
)

DEFAULT_SLOT_SHARING_GROUP = "default"
RUNTIME_MODES = ("STREAMING", "BATCH", "AUTOMATIC")


@dataclass(frozen=True)
class _Upstream:
    """A resolved input: a real node plus what virtual nodes on the way said about the edge."""

    node_id: int
    partitioner: PartitionerSpec | None = None
    exchange_mode: ExchangeMode = ExchangeMode.UNDEFINED
    output_tag: str | None = None


def _describe(t: Transformation) -> str:
    return f"operator '{t.name}' (id {t.id})"


def _describe_node(n: StreamNode) -> str:
    return f"operator '{n.name}' (id {n.id})"


def _collect(roots: list[Transformation]) -> list[Transformation]:
    """All transformations reachable through `.inputs`, deduped by id, inputs before consumers.

    Iterative post-order DFS so a long pipeline does not hit Python's recursion limit.
    """
    seen: set[int] = set()
    order: list[Transformation] = []
    for root in sorted(roots, key=lambda t: t.id):
        if root.id in seen:
            continue
        stack: list[tuple[Transformation, bool]] = [(root, False)]
        on_path: set[int] = set()
        while stack:
            t, expanded = stack.pop()
            if expanded:
                on_path.discard(t.id)
                if t.id not in seen:
                    seen.add(t.id)
                    order.append(t)
                continue
            if t.id in seen:
                continue
            if t.id in on_path:
                raise InvalidProgramError(f"{_describe(t)} is its own input: the program has a cycle")
            on_path.add(t.id)
            stack.append((t, True))
            for inp in reversed(t.inputs):
                if inp.id not in seen:
                    stack.append((inp, False))
    return order


def _check_inputs_present(t: Transformation) -> None:
    # the dataclasses allow None inputs; a missing input is a bug in the program / API layer
    missing = (
        (isinstance(t, (OneInputTransformation, PartitionTransformation, SideOutputTransformation)) and t.input is None)
        or (isinstance(t, TwoInputTransformation) and (t.input1 is None or t.input2 is None))
        or (isinstance(t, UnionTransformation) and not t.union_inputs)
    )
    if missing:
        raise InvalidProgramError(f"{_describe(t)} has a missing input: connect it to a stream")


def _resolve_mode(runtime_mode: str, sources: list[SourceTransformation]) -> str:
    """Flink's RuntimeExecutionMode: AUTOMATIC is BATCH iff every source is bounded."""
    mode = runtime_mode.upper()
    if mode not in RUNTIME_MODES:
        raise InvalidProgramError(f"unknown runtime mode '{runtime_mode}': use one of {', '.join(RUNTIME_MODES)}")
    if mode == "AUTOMATIC":
        return "BATCH" if sources and all(s.bounded for s in sources) else "STREAMING"
    if mode == "BATCH":
        unbounded = [s for s in sources if not s.bounded]
        if unbounded:
            raise InvalidProgramError(
                f"{_describe(unbounded[0])} is an unbounded source but the runtime mode is BATCH: "
                "use STREAMING (or AUTOMATIC)"
            )
    return mode


def generate_stream_graph(
    sinks_and_transformations: list[Transformation],
    job_name: str,
    default_parallelism: int,
    max_parallelism: int = 128,
    runtime_mode: str = "STREAMING",
    config: dict[str, str] | None = None,
) -> StreamGraph:
    """Build and validate the StreamGraph of a program (Flink's StreamGraphGenerator.generate)."""
    if default_parallelism < 1:
        raise InvalidProgramError(f"job '{job_name}': default parallelism must be >= 1, got {default_parallelism}")
    if max_parallelism < 1:
        raise InvalidProgramError(f"job '{job_name}': max parallelism must be >= 1, got {max_parallelism}")

    transformations = _collect(list(sinks_and_transformations))
    sources = [t for t in transformations if isinstance(t, SourceTransformation)]
    mode = _resolve_mode(runtime_mode, sources)
    graph = StreamGraph(
        job_name=job_name, runtime_mode=mode, max_parallelism=max_parallelism, config=dict(config or {})
    )

    # transformation id -> the real upstream nodes it stands for (itself, or what a virtual node hides)
    resolved: dict[int, list[_Upstream]] = {}
    uids: dict[str, StreamNode] = {}

    for t in transformations:
        _check_inputs_present(t)
        if isinstance(t, PartitionTransformation):
            # Flink: the partitioner closest to the consumer wins (addEdgeInternal only fills a null one)
            resolved[t.id] = [
                _Upstream(
                    u.node_id,
                    t.partitioner if t.partitioner is not None else u.partitioner,
                    t.exchange_mode if t.exchange_mode is not ExchangeMode.UNDEFINED else u.exchange_mode,
                    u.output_tag,
                )
                for inp in t.inputs  # its one input (present: checked above)
                for u in resolved[inp.id]
            ]
            continue
        if isinstance(t, SideOutputTransformation):
            # Flink: a virtual side-output node; the edges leave the operator with the tag on them
            if not isinstance(t.input, (OneInputTransformation, TwoInputTransformation)) or getattr(t.input, "is_sink", False):
                raise InvalidProgramError(
                    f"{_describe(t)}: get_side_output() needs the stream of a process function "
                    f"(process(), a window's process/apply), not {_describe(t.input) if t.input else 'nothing'}"
                )
            resolved[t.id] = [_Upstream(u.node_id, output_tag=t.output_tag) for u in resolved[t.input.id]]
            continue
        if isinstance(t, UnionTransformation):
            resolved[t.id] = [u for inp in t.union_inputs for u in resolved[inp.id]]
            continue
        if not isinstance(t, (SourceTransformation, OneInputTransformation, TwoInputTransformation)):
            raise InvalidProgramError(f"{_describe(t)}: unsupported transformation type {type(t).__name__}")

        node = _make_node(t, graph, resolved, default_parallelism)
        if node.uid is not None:
            if node.uid in uids:
                raise InvalidProgramError(
                    f"job '{job_name}': uid '{node.uid}' is used by both {_describe_node(uids[node.uid])} "
                    f"and {_describe_node(node)}: uids must be unique"
                )
            uids[node.uid] = node
        graph.nodes[node.id] = node
        resolved[t.id] = [_Upstream(node.id)]

        # a one-input operator's input is number 0; a two-input one's input1 and input2 are 0 and 1 (present: checked above)
        for type_number, inp in enumerate(t.inputs):
            for up in resolved[inp.id]:
                graph.add_edge(_make_edge(graph, up, node, type_number))

    _validate(graph)
    assign_operator_ids(graph)
    return graph


def _make_node(
    t: SourceTransformation | OneInputTransformation | TwoInputTransformation,
    graph: StreamGraph,
    resolved: dict[int, list[_Upstream]],
    default_parallelism: int,
) -> StreamNode:
    if not callable(t.operator_factory):
        raise InvalidProgramError(
            f"job '{graph.job_name}': {_describe(t)} has no operator factory (got {t.operator_factory!r}): "
            "it must be a zero-argument callable returning a StreamOperator"
        )
    parallelism = t.parallelism if t.parallelism is not None else default_parallelism
    node_max = t.max_parallelism if t.max_parallelism is not None else graph.max_parallelism
    if node_max < 1:
        raise InvalidProgramError(f"job '{graph.job_name}': {_describe(t)} has max parallelism {node_max} < 1")
    if parallelism < 1 or parallelism > node_max:
        raise InvalidProgramError(
            f"job '{graph.job_name}': {_describe(t)} has parallelism {parallelism}; "
            f"it must be between 1 and its max parallelism {node_max}"
        )
    input_node_ids = [u.node_id for inp in t.inputs for u in resolved[inp.id]]
    common: dict[str, Any] = dict(
        id=t.id,
        name=t.name,
        operator_factory=t.operator_factory,
        parallelism=parallelism,
        max_parallelism=node_max,
        parallelism_configured=bool(getattr(t, "parallelism_configured", False)),
        slot_sharing_group=_slot_sharing_group(t.slot_sharing_group, input_node_ids, graph),
        chaining_strategy=t.chaining_strategy,
        uid=t.uid,
        uid_hash=t.uid_hash,
        output_type=t.output_type,
        resources=t.resources,
    )
    if isinstance(t, SourceTransformation):
        return StreamNode(**common, num_inputs=0, is_source=True, coordinator_provider=t.coordinator_provider)
    if isinstance(t, OneInputTransformation):
        return StreamNode(
            **common, num_inputs=1, is_sink=t.is_sink, keyed=t.keyed, coordinator_provider=t.coordinator_provider
        )
    return StreamNode(**common, num_inputs=2, keyed=t.keyed)


def _slot_sharing_group(specified: str | None, input_node_ids: list[int], graph: StreamGraph) -> str:
    """Flink's StreamGraphGenerator.determineSlotSharingGroup: inherit the inputs' group if they agree."""
    if specified is not None:
        return specified
    group: str | None = None
    for nid in input_node_ids:
        candidate = graph.nodes[nid].slot_sharing_group
        if group is None:
            group = candidate
        elif group != candidate:
            return DEFAULT_SLOT_SHARING_GROUP
    return group if group is not None else DEFAULT_SLOT_SHARING_GROUP


def _make_edge(graph: StreamGraph, up: _Upstream, down: StreamNode, type_number: int) -> StreamEdge:
    """Flink's StreamGraph.addEdgeInternal: default FORWARD if parallelisms match, else REBALANCE."""
    upstream = graph.nodes[up.node_id]
    spec = up.partitioner
    same_p = upstream.parallelism == down.parallelism
    if spec is not None and spec.kind is PartitionerKind.FORWARD and not same_p:
        if spec.explicit:
            raise InvalidProgramError(
                f"job '{graph.job_name}': forward partitioning from {_describe_node(upstream)} "
                f"(parallelism {upstream.parallelism}) to {_describe_node(down)} (parallelism {down.parallelism}) "
                "does not allow a change of parallelism: use rebalance() or rescale(), or equal parallelisms"
            )
        spec = None  # an implicit forward falls back to the default (Flink's ForwardForUnspecifiedPartitioner)
    if spec is None:
        spec = PartitionerSpec(PartitionerKind.FORWARD if same_p else PartitionerKind.REBALANCE)
    if spec.kind is PartitionerKind.HASH and spec.key_selector is None:
        raise InvalidProgramError(
            f"job '{graph.job_name}': the hash partitioning into {_describe_node(down)} has no key selector: "
            "use key_by(<key function or field>)"
        )
    return StreamEdge(up.node_id, down.id, type_number, spec, up.exchange_mode, up.output_tag)


def _validate(graph: StreamGraph) -> None:
    if not any(n.is_sink for n in graph.nodes.values()):
        raise InvalidProgramError(
            f"job '{graph.job_name}' has no sink: add print(), sink_to(...) or execute_and_collect()"
        )
    for node in graph.nodes.values():
        # cheap consistency check: a keyed operator needs keyed input (hash, or forward from a keyed operator)
        if node.keyed and not any(
            e.partitioner.kind is PartitionerKind.HASH
            or (e.partitioner.kind is PartitionerKind.FORWARD and graph.nodes[e.source_id].keyed)
            for e in node.in_edges
        ):
            raise InvalidProgramError(
                f"job '{graph.job_name}': {_describe_node(node)} uses keyed state or timers but none of its "
                "inputs is partitioned by key: call key_by(...) before it"
            )
