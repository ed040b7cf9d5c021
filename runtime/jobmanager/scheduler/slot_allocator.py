"""Slot-sharing placement for any subset of vertices (Flink: SlotSharingExecutionSlotAllocator).

A shared slot is (slot sharing group, subtask index): subtask i of every vertex of group g runs in
shared slot (g, i). The first placement takes `assign_slots`; later placements (restarts) keep
every shared slot whose physical slot is still held, so survivors and restarted tasks of one
pipeline stay together, and give the shared slots whose TaskManager was lost a free slot of the
group's profile.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable

from runtime.core.errors import NoResourceAvailableError
from runtime.core.states import ExecutionState
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.jobmanager.scheduler.slot_sharing import _best_fit, assign_slots, group_resource_profiles
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool

SharedSlotKey = tuple[str, int]
_ENDED = (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


class ExecutionSlotAllocator:
    """`reuse_slots`: lazily scheduled jobs (batch) -- a shared slot whose tasks have all ended gives
    its physical slot back for other shared slots, so later regions run in the slots of earlier
    ones and a job needs only as many slots as its widest running region (Flink: a shared slot is
    released once its executions are done)."""

    def __init__(self, execution_graph: ExecutionGraph, slot_pool: SlotPool, reuse_slots: bool = False) -> None:
        self.eg = execution_graph
        self.slot_pool = slot_pool
        self.shared: dict[SharedSlotKey, PhysicalSlot] = {}
        self._profiles = group_resource_profiles(execution_graph.job_graph)
        self.reuse_slots = reuse_slots
        self._members: dict[SharedSlotKey, list[ExecutionVertexID]] = {}
        self._placed: set[str] = set()  # attempt ids that got a slot
        # speculative execution: attempt id -> (subtask, slot) of attempts outside their shared slot
        self._speculative: dict[str, tuple[ExecutionVertexID, PhysicalSlot]] = {}
        # settable: TaskManagers that take no new attempts (the speculative scheduler's blocklist)
        self.is_blocked: Callable[[str], bool] = lambda _tm_id: False
        self.refresh()

    def refresh(self) -> None:
        """The execution graph's subtasks changed (adaptive batch decided a parallelism)."""
        self._members = {}
        for ev in self.eg.all_vertices():
            self._members.setdefault(self._key(ev.id), []).append(ev.id)

    def _in_use(self, key: SharedSlotKey) -> bool:
        """An attempt placed in this shared slot has not ended (attempts still waiting for a slot do not count)."""
        for v in self._members.get(key, ()):
            ex = self.eg.vertex(v).current_execution
            if ex.attempt_id in self._placed and ex.state not in _ENDED:
                return True
        return False

    def _speculative_in_use(self) -> set[str]:
        """Allocation ids held by speculative (or losing) attempts that have not ended."""
        used = set()
        for attempt_id, (vid, slot) in list(self._speculative.items()):
            ex = self.eg.vertex(vid).execution(attempt_id)
            if ex is None or ex.state in _ENDED:
                del self._speculative[attempt_id]
            else:
                used.add(slot.allocation_id)
        return used

    def _free(self, used: set[str]) -> list[PhysicalSlot]:
        used = used | self._speculative_in_use()
        return [s for s in self.slot_pool.available() if s.allocation_id not in used and not self.is_blocked(s.tm_id)]

    def allocate_speculative(self, vid: ExecutionVertexID, attempt_id: str) -> PhysicalSlot | None:
        """A slot of the subtask's group for another attempt of it, on a TaskManager that is not blocked
        and not running another attempt of it; None if the pool has none free now."""
        ev = self.eg.vertex(vid)
        busy_tms = {getattr(ex.assigned_resource, "tm_id", None) for ex in ev.current_executions() if ex.state not in _ENDED}
        held = set(self.slot_pool.slots)
        used = {s.allocation_id for k, s in self.shared.items() if s.allocation_id in held and self._in_use(k)}
        free = [s for s in self._free(used) if s.tm_id not in busy_tms]
        slot = _best_fit(free, self._profiles.get(ev.job_vertex.slot_sharing_group))
        if slot is not None:
            self._speculative[attempt_id] = (vid, slot)
        return slot

    def promote(self, vid: ExecutionVertexID, winner_attempt_id: str, previous_attempt_id: str) -> None:
        """A speculative attempt became the subtask's current one: its slot becomes the shared slot,
        and the previous current attempt keeps its slot until it ended."""
        entry = self._speculative.pop(winner_attempt_id, None)
        if entry is None:
            return
        key = self._key(vid)
        old = self.shared.get(key)
        if old is not None:
            self._speculative[previous_attempt_id] = (vid, old)
        self.shared[key] = entry[1]
        self._placed.add(winner_attempt_id)

    def _key(self, vid: ExecutionVertexID) -> SharedSlotKey:
        return (self.eg.vertex(vid).job_vertex.slot_sharing_group, vid.subtask_index)

    def slot_of(self, vid: ExecutionVertexID) -> PhysicalSlot | None:
        return self.shared.get(self._key(vid))

    def allocate(self, vertices: Iterable[ExecutionVertexID]) -> dict[ExecutionVertexID, PhysicalSlot]:
        """Slots for `vertices`; raises NoResourceAvailableError (nothing changed) if the pool cannot serve them yet."""
        vertices = list(vertices)
        held = set(self.slot_pool.slots)
        if not self.shared and not self.reuse_slots:
            placement = assign_slots(self.eg, self.slot_pool.available())
            for vid, slot in placement.items():
                self.shared[self._key(vid)] = slot
            return {vid: placement[vid] for vid in vertices}
        alive = {k: s for k, s in self.shared.items() if s.allocation_id in held}
        if self.reuse_slots:
            wanted = {self._key(v) for v in vertices}
            # a shared slot on a blocked TaskManager serves only the tasks still running in it
            alive = {k: s for k, s in alive.items() if self._in_use(k) or (k in wanted and not self.is_blocked(s.tm_id))}
        free = self._free({s.allocation_id for s in alive.values()})
        new: dict[SharedSlotKey, PhysicalSlot] = {}
        for key in sorted({self._key(v) for v in vertices} - set(alive)):
            fit = _best_fit(free, self._profiles.get(key[0]))
            if fit is None:
                raise NoResourceAvailableError(
                    f"job {self.eg.job_id}: no free slot for shared slot {key[1]} of group '{key[0]}' "
                    f"({len(free)} free of {len(held)} held)"
                )
            free.remove(fit)
            new[key] = fit
        self.shared = {**alive, **new}
        self._placed.update(self.eg.vertex(v).current_execution.attempt_id for v in vertices)
        return {vid: self.shared[self._key(vid)] for vid in vertices}

    def lost_slots(self) -> int:
        held = set(self.slot_pool.slots)
        return sum(1 for s in self.shared.values() if s.allocation_id not in held)
