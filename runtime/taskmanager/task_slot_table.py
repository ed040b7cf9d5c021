"""TaskSlotTable: the TaskManager's slots and which job/allocation holds each (Flink: TaskSlotTableImpl)."""
from __future__ import annotations

from dataclasses import dataclass, field

from runtime.core.errors import MillraceError
from runtime.core.state_machine import StateMachine
from runtime.core.states import SlotState, slot_state_machine
from runtime.rpc.messages import SlotStatus


@dataclass
class TaskSlot:
    index: int
    machine: StateMachine[SlotState]
    allocation_id: str | None = None
    job_id: str | None = None
    tasks: set[str] = field(default_factory=set)  # execution attempt ids

    @property
    def state(self) -> SlotState:
        return self.machine.state


class TaskSlotTable:
    def __init__(self, num_slots: int, tm_id: str) -> None:
        if num_slots < 1:
            raise ValueError("a TaskManager needs at least one slot")
        self.slots = [TaskSlot(i, slot_state_machine(f"{tm_id} slot {i}")) for i in range(num_slots)]

    def allocate(self, allocation_id: str, job_id: str) -> TaskSlot:
        for slot in self.slots:
            if slot.allocation_id == allocation_id:
                return slot  # idempotent: a retried request
        for slot in self.slots:
            if slot.state is SlotState.FREE:
                slot.machine.transition(SlotState.ALLOCATED)
                slot.allocation_id, slot.job_id = allocation_id, job_id
                return slot
        raise MillraceError(f"no free slot for allocation {allocation_id} of job {job_id}")

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

    def report(self) -> list[SlotStatus]:
        return [SlotStatus(slot_index=s.index, state=s.state, allocation_id=s.allocation_id, job_id=s.job_id) for s in self.slots]
