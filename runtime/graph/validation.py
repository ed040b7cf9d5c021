"""Checks a submitted JobGraph before the Dispatcher sees it, so bad input is a 400 with a reason.

Pydantic checks the shape; this checks what pydantic cannot: that the graph is consistent (edges,
datasets and chained outputs point at things that exist, no cycles) and bounded (a parallelism of
10^18 would otherwise make the JobMaster expand 10^18 subtasks). Finally the graph is expanded the
way the JobMaster will expand it, so anything that would fail there fails here, with its message.
"""
from __future__ import annotations

from runtime.graph.job_graph import JobGraph

# Flink: KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM
MAX_PARALLELISM_UPPER_BOUND = 1 << 15
MAX_VERTICES = 10_000
MAX_SUBTASKS = 100_000


class JobGraphValidationError(ValueError):
    """The submitted JobGraph is inconsistent; the message says where and what to fix."""


def validate_job_graph(jg: JobGraph) -> None:
    """Raise JobGraphValidationError naming the first problem found."""
    where = f"JobGraph {jg.job_id!r} ('{jg.job_name}')"
    if not jg.job_id.strip():
        raise JobGraphValidationError(f"{where}: job_id must not be empty")
    if not jg.vertices:
        raise JobGraphValidationError(f"{where} has no vertices: a job needs at least one source")
    if len(jg.vertices) > MAX_VERTICES:
        raise JobGraphValidationError(f"{where} has {len(jg.vertices)} vertices; at most {MAX_VERTICES} are accepted")
    vertices = {}
    node_owner: dict[int, str] = {}
    datasets: dict[str, str] = {}  # dataset id -> producer vertex id
    subtasks = 0
    for v in jg.vertices:
        at = f"{where}, vertex {v.id!r} ('{v.name}')"
        if v.id in vertices:
            raise JobGraphValidationError(f"{at}: the vertex id is used twice")
        vertices[v.id] = v
        if not 1 <= v.max_parallelism <= MAX_PARALLELISM_UPPER_BOUND:
            raise JobGraphValidationError(f"{at}: max_parallelism {v.max_parallelism} is outside 1..{MAX_PARALLELISM_UPPER_BOUND}")
        if not 1 <= v.parallelism <= v.max_parallelism:
            raise JobGraphValidationError(f"{at}: parallelism {v.parallelism} must be between 1 and its max_parallelism {v.max_parallelism}")
        subtasks += v.parallelism
        if not v.operators:
            raise JobGraphValidationError(f"{at} has no operators")
        for op in v.operators:
            if op.node_id in node_owner:
                raise JobGraphValidationError(f"{at}: operator node id {op.node_id} is also used in vertex {node_owner[op.node_id]!r}")
            node_owner[op.node_id] = v.id
            if not 0 <= op.num_inputs <= 1024:
                raise JobGraphValidationError(f"{at}: operator '{op.name}' has num_inputs {op.num_inputs}")
        for ds in v.produced_datasets:
            if ds.id in datasets:
                raise JobGraphValidationError(f"{at}: dataset {ds.id!r} is produced twice")
            if ds.producer_vertex_id != v.id:
                raise JobGraphValidationError(f"{at}: dataset {ds.id!r} names {ds.producer_vertex_id!r} as its producer")
            datasets[ds.id] = v.id
    if subtasks > MAX_SUBTASKS:
        raise JobGraphValidationError(f"{where} has {subtasks} subtasks in all; at most {MAX_SUBTASKS} are accepted")
    for v in jg.vertices:
        at = f"{where}, vertex {v.id!r} ('{v.name}')"
        own_nodes = {op.node_id for op in v.operators}
        for op in v.operators:
            for out in op.chained_outputs:
                if out.target_node_id not in own_nodes:
                    raise JobGraphValidationError(f"{at}: operator '{op.name}' is chained to node {out.target_node_id}, which is not in this vertex")
            for ds_id in op.network_outputs:
                if datasets.get(ds_id) != v.id:
                    raise JobGraphValidationError(f"{at}: operator '{op.name}' writes dataset {ds_id!r}, which this vertex does not produce")
        for ds in v.produced_datasets:
            if ds.producer_node_id not in own_nodes:
                raise JobGraphValidationError(f"{at}: dataset {ds.id!r} is produced by node {ds.producer_node_id}, which is not in this vertex")
        for e in v.inputs:
            if e.target_vertex_id != v.id:
                raise JobGraphValidationError(f"{at}: an input edge names {e.target_vertex_id!r} as its target")
            if e.source_vertex_id not in vertices:
                raise JobGraphValidationError(f"{at}: an input edge comes from unknown vertex {e.source_vertex_id!r}")
            if datasets.get(e.dataset_id) != e.source_vertex_id:
                raise JobGraphValidationError(f"{at}: input dataset {e.dataset_id!r} is not produced by vertex {e.source_vertex_id!r}")
            if e.target_node_id not in own_nodes:
                raise JobGraphValidationError(f"{at}: an input edge targets node {e.target_node_id}, which is not in this vertex")
    try:
        jg.topological_vertices()
    except ValueError as e:
        raise JobGraphValidationError(f"{where}: {e}") from None
    _dry_run(jg, where)


def _dry_run(jg: JobGraph, where: str) -> None:
    """Expand the graph as the JobMaster will (subtasks, partitions); slot needs are the Dispatcher's check."""
    from runtime.graph.execution_graph import ExecutionGraph

    try:
        ExecutionGraph(jg)
    except Exception as e:  # noqa: BLE001 - whatever the expansion trips over is the graph's problem
        raise JobGraphValidationError(f"{where} cannot be expanded into subtasks: {type(e).__name__}: {e}") from None
