"""SlotPool: the slots a JobMaster holds, offered by TaskExecutors (Flink: DeclarativeSlotPool, simplified)."""
from __future__ import annotations

from dataclasses import dataclass

from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages import ResourceProfile


@dataclass(frozen=True)
class PhysicalSlot:
    allocation_id: str
    tm_id: str
    slot_index: int
    data_address: DataAddress
    # what the TaskExecutor offered (its total divided by its slots); None: not reported, fits anything
    resource_profile: ResourceProfile | None = None

    def can_serve(self, profile: ResourceProfile | None) -> bool:
        """Any slot serves the UNKNOWN profile (None); a known one needs at least that much of everything."""
        return profile is None or self.resource_profile is None or profile.fits_in(self.resource_profile)


class SlotPool:
    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.slots: dict[str, PhysicalSlot] = {}

    def offer(self, slot: PhysicalSlot) -> bool:
        self.slots[slot.allocation_id] = slot
        return True

    def release_task_manager(self, tm_id: str) -> list[PhysicalSlot]:
        lost = [s for s in self.slots.values() if s.tm_id == tm_id]
        for s in lost:
            del self.slots[s.allocation_id]
        return lost

    def available(self) -> list[PhysicalSlot]:
        """Stable order: by TaskManager, then slot index (so placement is deterministic)."""
        return sorted(self.slots.values(), key=lambda s: (s.tm_id, s.slot_index))

    def __len__(self) -> int:
        return len(self.slots)
