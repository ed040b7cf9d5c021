"""Slot-sharing placement for any subset of vertices (Flink: SlotSharingExecutionSlotAllocator).

A shared slot is (slot sharing group, subtask index): subtask i of every vertex of group g runs in
shared slot (g, i). The first placement takes `assign_slots`; later placements (restarts) keep
every shared slot whose physical slot is still held, so survivors and restarted tasks of one
pipeline stay together, and give the shared slots whose TaskManager was lost a free slot of the
group's profile.
"""
from __future__ import annotations

from typing import Iterable

from runtime.core.errors import NoResourceAvailableError
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.jobmanager.scheduler.slot_sharing import _best_fit, assign_slots, group_resource_profiles
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool

SharedSlotKey = tuple[str, int]


class ExecutionSlotAllocator:
    def __init__(self, execution_graph: ExecutionGraph, slot_pool: SlotPool) -> None:
        self.eg = execution_graph
        self.slot_pool = slot_pool
        self.shared: dict[SharedSlotKey, PhysicalSlot] = {}
        self._profiles = group_resource_profiles(execution_graph.job_graph)

    def _key(self, vid: ExecutionVertexID) -> SharedSlotKey:
        return (self.eg.vertex(vid).job_vertex.slot_sharing_group, vid.subtask_index)

    def slot_of(self, vid: ExecutionVertexID) -> PhysicalSlot | None:
        return self.shared.get(self._key(vid))

    def allocate(self, vertices: Iterable[ExecutionVertexID]) -> dict[ExecutionVertexID, PhysicalSlot]:
        """Slots for `vertices`; raises NoResourceAvailableError (nothing changed) if the pool cannot serve them yet."""
        vertices = list(vertices)
        held = set(self.slot_pool.slots)
        if not self.shared:
            placement = assign_slots(self.eg, self.slot_pool.available())
            for vid, slot in placement.items():
                self.shared[self._key(vid)] = slot
            return {vid: placement[vid] for vid in vertices}
        alive = {k: s for k, s in self.shared.items() if s.allocation_id in held}
        used = {s.allocation_id for s in alive.values()}
        free = [s for s in self.slot_pool.available() if s.allocation_id not in used]
        new: dict[SharedSlotKey, PhysicalSlot] = {}
        for key in sorted({self._key(v) for v in vertices} - set(alive)):
            slot = _best_fit(free, self._profiles.get(key[0]))
            if slot is None:
                raise NoResourceAvailableError(
                    f"job {self.eg.job_id}: no free slot for shared slot {key[1]} of group '{key[0]}' "
                    f"({len(free)} free of {len(held)} held)"
                )
            free.remove(slot)
            new[key] = slot
        self.shared = {**alive, **new}
        return {vid: self.shared[self._key(vid)] for vid in vertices}

    def lost_slots(self) -> int:
        held = set(self.slot_pool.slots)
        return sum(1 for s in self.shared.values() if s.allocation_id not in held)
