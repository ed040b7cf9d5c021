"""A readable execution plan of a JobGraph (what Flink's ExecutionPlan / JSON plan shows)."""
from __future__ import annotations

from typing import Any

from runtime.graph.job_graph import JobGraph, ResultPartitionType


def plan_summary(job_graph: JobGraph) -> dict[str, Any]:
    """A JSON-friendly description: vertices in topological order, numbered from 1."""
    vertices = job_graph.topological_vertices()
    number = {v.id: i + 1 for i, v in enumerate(vertices)}
    by_id = {v.id: v for v in vertices}
    return {
        "job_name": job_graph.job_name,
        "job_id": job_graph.job_id,
        "job_type": job_graph.job_type.value,
        "slots_required": job_graph.slots_required(),
        "vertices": [
            {
                "number": number[v.id],
                "id": v.id,
                "name": v.name,
                "operators": v.operator_names,
                # the ids state is stored under (savepoints match operators by them)
                "operator_ids": [{"name": op.name, "operator_id": op.operator_id, "uid": op.uid} for op in v.operators],
                "parallelism": v.parallelism,
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
    }


def format_plan(job_graph: JobGraph) -> str:
    """Text plan, one line per vertex and one per input, e.g. `<- [1] HASH`."""
    s = plan_summary(job_graph)
    slots = s["slots_required"]
    lines = [f"Job '{s['job_name']}' ({s['job_type']}), {slots} slot{'s' if slots != 1 else ''} needed"]
    for v in s["vertices"]:
        lines.append(
            f"  [{v['number']}] {v['name']}   parallelism {v['parallelism']}, "
            f"slot sharing group '{v['slot_sharing_group']}'"
        )
        for op in v["operator_ids"]:
            uid = "uid" if op["uid"] is not None and op["uid"] == op["operator_id"] else "generated"
            lines.append(f"      operator '{op['name']}': id {op['operator_id']} ({uid})")
        for i in v["inputs"]:
            blocking = " (blocking)" if i["result_type"] == ResultPartitionType.BLOCKING.value else ""
            lines.append(f"      <- [{i['source_vertex']}] {i['partitioner'].upper()}{blocking}")
    return "\n".join(lines)
