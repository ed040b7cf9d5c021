"""Slot sharing: subtask i of every vertex in a sharing group goes into the group's shared slot i.

Subtasks of different vertices share a slot; two subtasks of one vertex never do (index i is
unique per vertex). A job thus needs, per sharing group, as many slots as its highest parallelism
(Flink: SlotSharingExecutionSlotAllocator with LocalInputPreferredSlotSharingStrategy, simplified).
"""
from __future__ import annotations

from runtime.core.errors import NoResourceAvailableError
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.jobmanager.slot_pool import PhysicalSlot


def slots_per_group(eg: ExecutionGraph) -> dict[str, int]:
    groups: dict[str, int] = {}
    for ejv in eg.job_vertices:
        g = ejv.job_vertex.slot_sharing_group
        groups[g] = max(groups.get(g, 0), ejv.parallelism)
    return groups


def assign_slots(eg: ExecutionGraph, slots: list[PhysicalSlot]) -> dict[ExecutionVertexID, PhysicalSlot]:
    groups = slots_per_group(eg)
    needed = sum(groups.values())
    if len(slots) < needed:
        raise NoResourceAvailableError(f"job {eg.job_id} needs {needed} slots, has {len(slots)}")
    shared: dict[str, list[PhysicalSlot]] = {}
    it = iter(slots)
    for g in sorted(groups):
        shared[g] = [next(it) for _ in range(groups[g])]
    out: dict[ExecutionVertexID, PhysicalSlot] = {}
    for ev in eg.all_vertices():
        out[ev.id] = shared[ev.job_vertex.slot_sharing_group][ev.subtask_index]
    return out
