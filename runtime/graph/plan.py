"""A readable execution plan of a JobGraph (what Flink's ExecutionPlan / JSON plan shows)."""
from __future__ import annotations

from typing import Any

from runtime.graph.job_graph import JobGraph, ResultPartitionType


def plan_summary(job_graph: JobGraph) -> dict[str, Any]:
    """A JSON-friendly description: vertices in topological order, numbered from 1."""
    from runtime.graph.regions import compute_logical_regions

    vertices = job_graph.topological_vertices()
    number = {v.id: i + 1 for i, v in enumerate(vertices)}
    by_id = {v.id: v for v in vertices}
    regions = sorted((sorted(number[v] for v in r) for r in compute_logical_regions(job_graph)), key=lambda r: r[0])
    return {
        "job_name": job_graph.job_name,
        "job_id": job_graph.job_id,
        "job_type": job_graph.job_type.value,
        "slots_required": job_graph.slots_required(),
        # per slot sharing group: the slot each of its subtasks' slots must have (null: a default
        # slot) and how many (its highest parallelism)
        "slot_sharing_groups": [
            {"name": g, "resources": spec.model_dump() if spec is not None else None, "slots": job_graph.slots_per_group()[g]}
            for g, spec in job_graph.group_resources().items()
        ],
        "vertices": [
            {
                "number": number[v.id],
                "id": v.id,
                "name": v.name,
                "operators": v.operator_names,
                # the ids state is stored under (savepoints match operators by them)
                "operator_ids": [{"name": op.name, "operator_id": op.operator_id, "uid": op.uid} for op in v.operators],
                "parallelism": v.parallelism,
                "dynamic_parallelism": v.dynamic_parallelism,  # adaptive batch: decided from the data, at most `parallelism`
                "max_parallelism": v.max_parallelism,
                "slot_sharing_group": v.slot_sharing_group,
                "inputs": [
                    {
                        "source_vertex": number[e.source_vertex_id],
                        "source_vertex_name": by_id[e.source_vertex_id].name,
                        "partitioner": e.partitioner.value,
                        "distribution_pattern": e.distribution_pattern.value,
                        "result_type": job_graph.dataset(e.dataset_id).result_type.value,
                        "type_number": e.type_number,
                    }
                    for e in v.inputs
                ],
            }
            for v in vertices
        ],
        # pipelined regions over vertices (their subtasks run and restart together); with blocking
        # exchanges (batch) a region is scheduled once the regions it reads from have finished
        "regions": [{"number": i + 1, "vertices": r} for i, r in enumerate(regions)],
    }


def format_plan(job_graph: JobGraph) -> str:
    """Text plan, one line per vertex and one per input, e.g. `<- [1] HASH`."""
    s = plan_summary(job_graph)
    slots = s["slots_required"]
    lines = [f"Job '{s['job_name']}' ({s['job_type']}), {slots} slot{'s' if slots != 1 else ''} needed"]
    for g, spec in job_graph.group_resources().items():
        n = job_graph.slots_per_group()[g]
        plural = "s" if n != 1 else ""
        what = f"slot{plural} of {spec.describe()}" if spec is not None else f"default slot{plural} (no resources declared)"
        lines.append(f"  slot sharing group '{g}': {n} {what}")
    for v in s["vertices"]:
        parallelism = f"parallelism from the data, at most {v['parallelism']}" if v["dynamic_parallelism"] else f"parallelism {v['parallelism']}"
        lines.append(f"  [{v['number']}] {v['name']}   {parallelism}, slot sharing group '{v['slot_sharing_group']}'")
        for op in v["operator_ids"]:
            uid = "uid" if op["uid"] is not None and op["uid"] == op["operator_id"] else "generated"
            lines.append(f"      operator '{op['name']}': id {op['operator_id']} ({uid})")
        for i in v["inputs"]:
            blocking = " (blocking)" if i["result_type"] == ResultPartitionType.BLOCKING.value else ""
            lines.append(f"      <- [{i['source_vertex']}] {i['partitioner'].upper()}{blocking}")
    if any(i["result_type"] == ResultPartitionType.BLOCKING.value for v in s["vertices"] for i in v["inputs"]):
        lines.append("Pipelined regions (scheduled lazily from the sources; blocking results in Delta):")
        for r in s["regions"]:
            lines.append(f"  region {r['number']}: vertices {', '.join(f'[{n}]' for n in r['vertices'])}")
    return "\n".join(lines)
