"""SlotManager: registered TaskManagers, their slots, pending requests (Flink: FineGrainedSlotManager, simplified).

Pure bookkeeping, no I/O: the ResourceManager turns its decisions into RPCs and provider calls.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from runtime.core.states import SlotState
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages import RegisterTaskExecutor, SlotReport


@dataclass
class SlotInfo:
    index: int
    state: SlotState = SlotState.FREE
    allocation_id: str | None = None
    job_id: str | None = None
    pending: bool = False  # requested from the TE, not yet confirmed by a report


@dataclass
class TaskManagerRegistration:
    tm_id: str
    registration: RegisterTaskExecutor
    slots: list[SlotInfo]
    last_heartbeat: float = field(default_factory=time.monotonic)

    @property
    def data_address(self) -> DataAddress:
        return self.registration.data_address

    def free_slots(self) -> list[SlotInfo]:
        return [s for s in self.slots if s.state is SlotState.FREE and s.allocation_id is None]


@dataclass
class JobRequirement:
    job_id: str
    job_master_endpoint: str
    slots: int
    allocations: set[str] = field(default_factory=set)
    suspended: bool = False  # lost slots: wait until the JobMaster says what it still needs

    @property
    def missing(self) -> int:
        return 0 if self.suspended else max(0, self.slots - len(self.allocations))


@dataclass
class Allocation:
    tm_id: str
    slot_index: int
    allocation_id: str
    job_id: str
    job_master_endpoint: str


class SlotManager:
    def __init__(self, slots_per_tm: int = 1, max_task_managers: int | None = None) -> None:
        self.slots_per_tm = slots_per_tm
        self.max_task_managers = max_task_managers
        self.task_managers: dict[str, TaskManagerRegistration] = {}
        self.pending_task_managers: dict[str, float] = {}  # tm_id -> requested at
        self.requirements: dict[str, JobRequirement] = {}

    # TaskManagers ---------------------------------------------------------------------------
    def register(self, reg: RegisterTaskExecutor) -> TaskManagerRegistration:
        self.pending_task_managers.pop(reg.tm_id, None)
        tmr = TaskManagerRegistration(reg.tm_id, reg, [SlotInfo(i) for i in range(reg.num_slots)])
        self.task_managers[reg.tm_id] = tmr
        return tmr

    def unregister(self, tm_id: str) -> set[str]:
        """Remove a TaskManager; returns the ids of jobs that had slots on it."""
        self.pending_task_managers.pop(tm_id, None)
        tmr = self.task_managers.pop(tm_id, None)
        if tmr is None:
            return set()
        jobs = {s.job_id for s in tmr.slots if s.job_id}
        for s in tmr.slots:
            if s.job_id in self.requirements and s.allocation_id:
                self.requirements[s.job_id].allocations.discard(s.allocation_id)
        for job_id in jobs:
            if job_id in self.requirements:
                # the job decides whether it wants replacements (a failing job does not)
                self.requirements[job_id].suspended = True
        return jobs  # type: ignore[return-value]

    def report(self, report: SlotReport) -> None:
        tmr = self.task_managers.get(report.tm_id)
        if tmr is None:
            return
        tmr.last_heartbeat = time.monotonic()
        for st in report.slots:
            info = tmr.slots[st.slot_index]
            if info.pending and st.allocation_id != info.allocation_id:
                continue  # the TE has not processed our request yet
            info.pending = False
            if st.state is SlotState.FREE and info.allocation_id is not None:
                req = self.requirements.get(info.job_id or "")
                if req is not None:
                    req.allocations.discard(info.allocation_id)
            info.state, info.allocation_id, info.job_id = st.state, st.allocation_id, st.job_id

    def confirm(self, tm_id: str, slot_index: int, allocation_id: str) -> None:
        """The TaskExecutor acknowledged our slot request: its reports are authoritative again."""
        tmr = self.task_managers.get(tm_id)
        if tmr is not None and tmr.slots[slot_index].allocation_id == allocation_id:
            tmr.slots[slot_index].pending = False

    # requirements ---------------------------------------------------------------------------
    def declare(self, job_id: str, job_master_endpoint: str, slots: int) -> None:
        if slots <= 0:
            self.requirements.pop(job_id, None)
            return
        req = self.requirements.setdefault(job_id, JobRequirement(job_id, job_master_endpoint, slots))
        req.slots, req.job_master_endpoint, req.suspended = slots, job_master_endpoint, False

    def allocations_of(self, job_id: str) -> list[tuple[str, SlotInfo]]:
        return [(t.tm_id, s) for t in self.task_managers.values() for s in t.slots if s.job_id == job_id]

    def check(self) -> tuple[list[Allocation], int]:
        """Match free slots to missing requirements; returns allocations and TaskManagers to request."""
        allocations: list[Allocation] = []
        for req in self.requirements.values():
            while req.missing > 0:
                slot = self._take_free_slot()
                if slot is None:
                    break
                tm_id, info = slot
                alloc_id = uuid.uuid4().hex
                info.state, info.allocation_id, info.job_id, info.pending = SlotState.ALLOCATED, alloc_id, req.job_id, True
                req.allocations.add(alloc_id)
                allocations.append(Allocation(tm_id, info.index, alloc_id, req.job_id, req.job_master_endpoint))
        missing = sum(r.missing for r in self.requirements.values())
        pending_slots = len(self.pending_task_managers) * self.slots_per_tm
        to_request = max(0, -(-(missing - pending_slots) // self.slots_per_tm))
        if self.max_task_managers is not None:
            room = self.max_task_managers - len(self.task_managers) - len(self.pending_task_managers)
            to_request = max(0, min(to_request, room))
        return allocations, to_request

    def _take_free_slot(self) -> tuple[str, SlotInfo] | None:
        for tmr in self.task_managers.values():
            free = tmr.free_slots()
            if free:
                return tmr.tm_id, free[0]
        return None

    @property
    def total_slots(self) -> int:
        return sum(len(t.slots) for t in self.task_managers.values())

    @property
    def free_slots(self) -> int:
        return sum(len(t.free_slots()) for t in self.task_managers.values())
