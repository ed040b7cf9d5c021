"""TaskSlotTable: the TaskManager's slots and which job/allocation holds each (Flink: TaskSlotTableImpl).

Its resources are its total profile. A request without a profile takes one of the default slots
(indices 0..n-1, each the total divided by n); a request with a profile (dynamic slots) gets a
slot of exactly that, cut from what the allocated slots leave free, at the lowest unused index,
and a freed one gives it back. Either way the slots never hold more than the total.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from runtime.core.errors import MillraceError
from runtime.core.state_machine import StateMachine
from runtime.core.states import SlotState, slot_state_machine
from runtime.rpc.messages import ResourceProfile, SlotStatus


@dataclass
class TaskSlot:
    index: int
    machine: StateMachine[SlotState]
    profile: ResourceProfile
    allocation_id: str | None = None
    job_id: str | None = None
    tasks: set[str] = field(default_factory=set)  # execution attempt ids
    dynamic: bool = False  # cut for a request with a profile: forgotten once freed
    declared: bool = False  # its profile is a group's declared resources (the per-slot heap check applies)

    @property
    def state(self) -> SlotState:
        return self.machine.state


class TaskSlotTable:
    def __init__(self, num_slots: int, tm_id: str, total: ResourceProfile | None = None) -> None:
        if num_slots < 1:
            raise ValueError("a TaskManager needs at least one slot")
        self.tm_id = tm_id
        self.num_slots = num_slots
        self.total = total or ResourceProfile().multiply(num_slots)
        self.default_profile = self.total.divide(num_slots)
        self.slots = [TaskSlot(i, slot_state_machine(f"{tm_id} slot {i}"), self.default_profile) for i in range(num_slots)]

    def allocated_profile(self) -> ResourceProfile:
        used = ResourceProfile.zero()
        for s in self.slots:
            if s.state is not SlotState.FREE:
                used = used.merge(s.profile)
        return used

    def free_profile(self) -> ResourceProfile:
        return self.total.subtract(self.allocated_profile())

    def allocate(self, allocation_id: str, job_id: str, profile: ResourceProfile | None = None, declared: bool = False) -> TaskSlot:
        retried = self.by_allocation(allocation_id)
        if retried is not None:
            return retried  # idempotent: a retried request
        wanted = profile or self.default_profile
        if not wanted.fits_in(self.free_profile()):
            raise MillraceError(
                f"TaskManager {self.tm_id} cannot give allocation {allocation_id} of job {job_id} a slot of {wanted.describe()}: "
                f"only {self.free_profile().describe()} of its {self.total.describe()} are free"
            )
        slot = self._free_default_slot() if profile is None else self._dynamic_slot(profile)
        if slot is None:
            raise MillraceError(f"no free slot for allocation {allocation_id} of job {job_id}")
        slot.machine.transition(SlotState.ALLOCATED)
        slot.allocation_id, slot.job_id, slot.declared = allocation_id, job_id, declared
        return slot

    def _free_default_slot(self) -> TaskSlot | None:
        return next((s for s in self.slots if s.state is SlotState.FREE and not s.dynamic), None)

    def _dynamic_slot(self, profile: ResourceProfile) -> TaskSlot:
        """A slot of `profile` at the lowest index no slot in use (or cut) holds."""
        used = {s.index for s in self.slots if s.state is not SlotState.FREE or s.dynamic}
        index = next(i for i in range(len(self.slots) + 1) if i not in used)
        slot = next((s for s in self.slots if s.index == index), None)
        if slot is None:
            slot = TaskSlot(index, slot_state_machine(f"{self.tm_id} slot {index}"), profile)
            self.slots.append(slot)
        slot.profile, slot.dynamic = profile, True
        return slot

    def by_allocation(self, allocation_id: str) -> TaskSlot | None:
        return next((s for s in self.slots if s.allocation_id == allocation_id), None)

    def add_task(self, allocation_id: str, job_id: str, attempt_id: str) -> TaskSlot:
        slot = self.by_allocation(allocation_id)
        if slot is None or slot.job_id != job_id:
            raise MillraceError(f"no slot allocated for allocation {allocation_id} of job {job_id}")
        if slot.state is SlotState.ALLOCATED:
            slot.machine.transition(SlotState.ACTIVE)
        slot.tasks.add(attempt_id)
        return slot

    def slot_of_task(self, attempt_id: str) -> TaskSlot | None:
        return next((s for s in self.slots if attempt_id in s.tasks), None)

    def remove_task(self, attempt_id: str) -> None:
        for slot in self.slots:
            slot.tasks.discard(attempt_id)

    def start_release(self, allocation_id: str) -> TaskSlot | None:
        slot = self.by_allocation(allocation_id)
        if slot is not None and slot.state is not SlotState.RELEASING:
            slot.machine.transition(SlotState.RELEASING)
        return slot

    def finish_release(self, slot: TaskSlot) -> None:
        if slot.state is SlotState.RELEASING and not slot.tasks:
            slot.machine.transition(SlotState.FREE)
            slot.allocation_id = slot.job_id = None
            slot.declared = False
            if slot.dynamic:  # its resources go back; a default slot's index is kept
                if slot.index < self.num_slots:
                    slot.profile, slot.dynamic = self.default_profile, False
                else:
                    self.slots.remove(slot)

    def report(self) -> list[SlotStatus]:
        return [
            SlotStatus(slot_index=s.index, state=s.state, allocation_id=s.allocation_id, job_id=s.job_id, resource_profile=s.profile)
            for s in sorted(self.slots, key=lambda s: s.index)
        ]
