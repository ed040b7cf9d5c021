"""SlotManager: registered TaskManagers, their slots, pending TaskManagers, job requirements.

Flink: FineGrainedSlotManager (+ TaskManagerTracker, DefaultResourceAllocationStrategy), simplified.
Pure bookkeeping, no I/O and no wall clock of its own (the clock is injected): the
ResourceManager turns its decisions (`check()`) into RPCs and provider calls.

- Dynamic slots (`dynamic=True`, the ResourceManager's default; Flink: FLIP-156): a TaskManager
  registers its total resources and a slot of exactly the requested profile is cut from what is
  free on it (the UNKNOWN profile gets the default slot: the total divided by the TaskManager's
  slot count); a freed slot gives its resources back. Static slots (`dynamic=False`): every slot
  is the default slot, fixed at registration; a requirement with a profile is served only by a
  slot at least that big in every dimension, the UNKNOWN profile by any slot.
- Which TaskManager: packing (first fit: best-fit among static slots) or, with
  `evenly_spread_out_slots` (Flink: cluster.evenly-spread-out-slots), the least used one.
  Requirements with a profile are matched first, so a job without declared resources does not take
  the only room another job's group fits.
- What free and pending slots cannot serve becomes TaskManager requests: default-shaped ones for
  requirements a default slot serves (packed `slots_per_tm` to a TaskManager), a one-slot
  TaskManager sized to the requirement otherwise, never bigger than `max_task_manager_profile`
  and never more than `max_task_managers` in all, nor more than `max_total_cpu` /
  `max_total_memory_mb` (task heap + managed) over all TaskManagers (Flink: slotmanager.max-total-resource.*).
- Scaling: never fewer than `min_task_managers` (lost ones are replaced); a TaskManager whose
  slots have all been free for `idle_timeout_s` is released, down to the minimum; when the cap is
  reached, idle TaskManagers no pending requirement fits are released to make room for one that does.
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from runtime.core.states import SlotState
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages import (
    RegisterTaskExecutor,
    ResourceProfile,
    ResourceRequirement,
    SlotReport,
)

Clock = Callable[[], float]


def serves(slot: ResourceProfile, wanted: ResourceProfile | None) -> bool:
    """Does a slot of profile `slot` serve a requirement of `wanted` (None = UNKNOWN, any slot does)?"""
    return wanted is None or wanted.fits_in(slot)


@dataclass
class SlotInfo:
    index: int
    profile: ResourceProfile = field(default_factory=ResourceProfile)
    state: SlotState = SlotState.FREE
    allocation_id: str | None = None
    job_id: str | None = None
    pending: bool = False  # requested from the TE, not yet confirmed by a report

    @property
    def is_free(self) -> bool:
        return self.state is SlotState.FREE and self.allocation_id is None


@dataclass
class TaskManagerRegistration:
    """A registered TaskManager. Static: `slots` are its fixed default slots; dynamic: the slots cut
    from it so far (each of its own profile), its free resources being the rest of its total."""

    tm_id: str
    registration: RegisterTaskExecutor
    slots: list[SlotInfo]
    last_heartbeat: float = field(default_factory=time.monotonic)
    idle_since: float | None = None  # all slots free since then (None: some slot is in use)
    dynamic: bool = False

    @property
    def data_address(self) -> DataAddress:
        return self.registration.data_address

    @property
    def total_profile(self) -> ResourceProfile:
        return self.registration.resource_profile

    @property
    def default_slot_profile(self) -> ResourceProfile:
        return self.total_profile.divide(self.registration.num_slots)

    @property
    def allocated_profile(self) -> ResourceProfile:
        used = ResourceProfile.zero()
        for s in self.slots:
            if not s.is_free:
                used = used.merge(s.profile)
        return used

    @property
    def free_profile(self) -> ResourceProfile:
        """Dynamic: what slots can still be cut from; static: the sum of the free slots."""
        if not self.dynamic:
            free = ResourceProfile.zero()
            for s in self.free_slots():
                free = free.merge(s.profile)
            return free
        return self.total_profile.subtract(self.allocated_profile)

    def free_slots(self) -> list[SlotInfo]:
        """Static: the free slots. Dynamic: the default slots that still fit into the free resources."""
        if not self.dynamic:
            return [s for s in self.slots if s.is_free]
        n = self.free_profile.count_of(self.default_slot_profile)
        return [SlotInfo(-1, self.default_slot_profile) for _ in range(min(n, self.registration.num_slots))]

    @property
    def slot_count(self) -> int:
        """Static: its slots; dynamic: the slots cut plus the default slots that still fit."""
        return len(self.slots) if not self.dynamic else sum(1 for s in self.slots if not s.is_free) + len(self.free_slots())

    def can_cut(self, profile: ResourceProfile) -> bool:
        return profile.fits_in(self.free_profile)

    def cut(self, profile: ResourceProfile) -> SlotInfo:
        """Dynamic: a new slot of exactly `profile` (the caller checked `can_cut`)."""
        used = {s.index for s in self.slots}
        info = SlotInfo(next(i for i in range(len(used) + 1) if i not in used), profile)
        self.slots.append(info)
        return info

    def forget(self, info: SlotInfo) -> None:
        """Dynamic: a freed slot gives its resources back."""
        if self.dynamic and info in self.slots:
            self.slots.remove(info)

    @property
    def utilization(self) -> float:
        """The larger share of CPU or task heap in use (spread placement prefers the lowest)."""
        total, used = self.total_profile, self.allocated_profile
        return max(used.cpu_cores / total.cpu_cores if total.cpu_cores else 0.0, used.task_heap_mb / total.task_heap_mb if total.task_heap_mb else 0.0)

    @property
    def is_idle(self) -> bool:
        return all(s.is_free and not s.pending for s in self.slots)


@dataclass(frozen=True)
class TaskManagerShape:
    """A TaskManager to start: its total profile and how many slots divide it (Flink: WorkerResourceSpec)."""

    profile: ResourceProfile
    num_slots: int

    @property
    def slot_profile(self) -> ResourceProfile:
        return self.profile.divide(self.num_slots)


@dataclass
class PendingTaskManager:
    tm_id: str
    shape: TaskManagerShape
    requested_at: float


@dataclass
class RequirementEntry:
    """One slot sharing group's need: `count` slots of `profile` and the allocations serving it."""

    slot_sharing_group: str
    profile: ResourceProfile | None
    count: int
    allocations: set[str] = field(default_factory=set)
    # elastic (reactive mode): slots above `least` come from free slots only, never from started
    # TaskManagers: the cluster's size is its operator's to set (millrace cluster scale)
    least: int | None = None
    elastic: bool = False

    @property
    def missing(self) -> int:
        return max(0, self.count - len(self.allocations))

    @property
    def missing_to_start(self) -> int:
        """Missing slots worth starting TaskManagers for."""
        if not self.elastic:
            return self.missing
        return max(0, (self.least if self.least is not None else self.count) - len(self.allocations))


@dataclass
class JobRequirement:
    job_id: str
    job_master_endpoint: str
    entries: list[RequirementEntry]
    job_name: str = ""
    suspended: bool = False  # lost slots: wait until the JobMaster says what it still needs

    @property
    def slots(self) -> int:
        return sum(e.count for e in self.entries)

    @property
    def allocations(self) -> set[str]:
        return set().union(*(e.allocations for e in self.entries)) if self.entries else set()

    @property
    def missing(self) -> int:
        return 0 if self.suspended else sum(e.missing for e in self.entries)

    def discard(self, allocation_id: str) -> None:
        for e in self.entries:
            e.allocations.discard(allocation_id)


@dataclass
class Allocation:
    tm_id: str
    slot_index: int
    allocation_id: str
    job_id: str
    job_master_endpoint: str
    profile: ResourceProfile | None = None  # dynamic: the slot to cut; static: None (a default slot)
    declared: bool = False  # the requirement's own profile (not UNKNOWN)


@dataclass
class ResourceDecision:
    """What `check()` asks the ResourceManager to do."""

    allocations: list[Allocation] = field(default_factory=list)
    start: list[TaskManagerShape] = field(default_factory=list)
    release: list[str] = field(default_factory=list)  # registered TaskManagers to release (idle)


class SlotManager:
    def __init__(
        self,
        slots_per_tm: int = 1,
        max_task_managers: int | None = None,
        *,
        task_manager_profile: ResourceProfile | None = None,
        max_task_manager_profile: ResourceProfile | None = None,
        min_task_managers: int = 0,
        idle_timeout_s: float | None = None,
        clock: Clock = time.monotonic,
        dynamic: bool = False,
        evenly_spread_out_slots: bool = False,
        max_total_cpu: float | None = None,
        max_total_memory_mb: int | None = None,
    ) -> None:
        if slots_per_tm < 1:
            raise ValueError("a TaskManager needs at least one slot")
        self.slots_per_tm = slots_per_tm
        self.max_task_managers = max_task_managers
        # the default TaskManager: one default slot profile (1 CPU, 512 MB heap, 128 MB managed) per slot
        self.default_shape = TaskManagerShape(task_manager_profile or ResourceProfile().multiply(slots_per_tm), slots_per_tm)
        self.max_task_manager_profile = max_task_manager_profile  # None: no bound
        self.min_task_managers = min_task_managers
        self.idle_timeout_s = idle_timeout_s
        self.clock = clock
        self.dynamic = dynamic
        self.evenly_spread_out_slots = evenly_spread_out_slots
        self.max_total_cpu = max_total_cpu
        self.max_total_memory_mb = max_total_memory_mb
        self.task_managers: dict[str, TaskManagerRegistration] = {}
        self.pending_task_managers: dict[str, PendingTaskManager] = {}
        self.requirements: dict[str, JobRequirement] = {}

    # TaskManagers ---------------------------------------------------------------------------
    def add_pending(self, tm_id: str, shape: TaskManagerShape) -> None:
        self.pending_task_managers[tm_id] = PendingTaskManager(tm_id, shape, self.clock())

    def register(self, reg: RegisterTaskExecutor) -> TaskManagerRegistration:
        self.pending_task_managers.pop(reg.tm_id, None)
        slot_profile = reg.resource_profile.divide(reg.num_slots)
        now = self.clock()
        slots = [] if self.dynamic else [SlotInfo(i, slot_profile) for i in range(reg.num_slots)]
        tmr = TaskManagerRegistration(reg.tm_id, reg, slots, last_heartbeat=now, idle_since=now, dynamic=self.dynamic)
        self.task_managers[reg.tm_id] = tmr
        return tmr

    def unregister(self, tm_id: str) -> set[str]:
        """Remove a TaskManager; returns the ids of jobs that had slots on it."""
        self.pending_task_managers.pop(tm_id, None)
        tmr = self.task_managers.pop(tm_id, None)
        if tmr is None:
            return set()
        jobs: set[str] = {s.job_id for s in tmr.slots if s.job_id}
        for s in tmr.slots:
            if s.job_id in self.requirements and s.allocation_id:
                self.requirements[s.job_id].discard(s.allocation_id)
        for job_id in jobs:
            if job_id in self.requirements:
                # the job decides whether it wants replacements (a failing job does not)
                self.requirements[job_id].suspended = True
        return jobs

    def report(self, report: SlotReport) -> None:
        tmr = self.task_managers.get(report.tm_id)
        if tmr is None:
            return
        tmr.last_heartbeat = self.clock()
        if tmr.dynamic:
            self._report_dynamic(tmr, report)
            self._update_idle(tmr)
            return
        for st in report.slots:
            info = tmr.slots[st.slot_index]
            if info.pending and st.allocation_id != info.allocation_id:
                continue  # the TE has not processed our request yet
            info.pending = False
            if st.state is SlotState.FREE and info.allocation_id is not None:
                req = self.requirements.get(info.job_id or "")
                if req is not None:
                    req.discard(info.allocation_id)
            info.state, info.allocation_id, info.job_id = st.state, st.allocation_id, st.job_id
        self._update_idle(tmr)

    def _report_dynamic(self, tmr: TaskManagerRegistration, report: SlotReport) -> None:
        """Dynamic slots are known by allocation: one the TaskExecutor no longer holds was freed (its
        resources come back), one it holds that we do not know is adopted (e.g. after a failover)."""
        held = {st.allocation_id: st for st in report.slots if st.allocation_id is not None and st.state is not SlotState.FREE}
        for info in list(tmr.slots):
            st = held.pop(info.allocation_id or "", None)
            if st is None:
                if info.pending:
                    continue  # the TE has not processed our request yet
                req = self.requirements.get(info.job_id or "")
                if req is not None and info.allocation_id is not None:
                    req.discard(info.allocation_id)
                tmr.forget(info)
                continue
            info.pending, info.state, info.job_id = False, st.state, st.job_id
            info.index = st.slot_index
        for st in held.values():
            profile = st.resource_profile or tmr.default_slot_profile
            tmr.slots.append(SlotInfo(st.slot_index, profile, st.state, st.allocation_id, st.job_id))

    def _slot_of(self, tm_id: str, allocation_id: str) -> tuple[TaskManagerRegistration, SlotInfo] | None:
        tmr = self.task_managers.get(tm_id)
        if tmr is None:
            return None
        info = next((s for s in tmr.slots if s.allocation_id == allocation_id), None)
        return (tmr, info) if info is not None else None

    def confirm(self, tm_id: str, slot_index: int, allocation_id: str) -> None:
        """The TaskExecutor acknowledged our slot request: its reports are authoritative again."""
        found = self._slot_of(tm_id, allocation_id)
        if found is not None:
            found[1].pending = False

    def allocation_failed(self, allocation: Allocation) -> None:
        """The TaskExecutor could not be asked for the slot: free it and let the job ask again."""
        found = self._slot_of(allocation.tm_id, allocation.allocation_id)
        if found is not None:
            tmr, info = found
            info.state, info.allocation_id, info.job_id, info.pending = SlotState.FREE, None, None, False
            tmr.forget(info)
            self._update_idle(tmr)
        req = self.requirements.get(allocation.job_id)
        if req is not None:
            req.discard(allocation.allocation_id)

    def _update_idle(self, tmr: TaskManagerRegistration) -> None:
        if not tmr.is_idle:
            tmr.idle_since = None
        elif tmr.idle_since is None:
            tmr.idle_since = self.clock()

    # requirements ---------------------------------------------------------------------------
    def declare(
        self, job_id: str, job_master_endpoint: str, requirements: int | list[ResourceRequirement], job_name: str = ""
    ) -> None:
        """Replace the job's requirements (an int is that many UNKNOWN slots; nothing clears them).

        Allocations already serving a slot sharing group stay with it if the group keeps its profile.
        """
        if isinstance(requirements, int):
            requirements = [ResourceRequirement(count=requirements)] if requirements > 0 else []
        requirements = [r for r in requirements if r.count > 0]
        if not requirements:
            self.requirements.pop(job_id, None)
            return
        old = self.requirements.get(job_id)
        kept = {(e.slot_sharing_group, _key(e.profile)): e.allocations for e in old.entries} if old else {}
        entries = [
            RequirementEntry(r.slot_sharing_group, r.profile, r.count, set(kept.get((r.slot_sharing_group, _key(r.profile)), set())), r.least, r.elastic)
            for r in requirements
        ]
        self.requirements[job_id] = JobRequirement(job_id, job_master_endpoint, entries, job_name or (old.job_name if old else ""))

    def allocations_of(self, job_id: str) -> list[tuple[str, SlotInfo]]:
        return [(t.tm_id, s) for t in self.task_managers.values() for s in t.slots if s.job_id == job_id]

    def capacity_problem(self, job: str, requirements: list[ResourceRequirement]) -> str | None:
        """Why the cluster could never serve these requirements, even empty; None if it could.

        `job` names the job in the message ("job <id> '<name>'"). Requirements count with their
        least (`min_count`): a job that can run with fewer slots than it asks for fits then.
        """
        requirements = [r.model_copy(update={"count": r.least, "min_count": None}) for r in requirements]
        for r in requirements:
            if r.count == 0 or (r.profile is not None and any(r.profile.fits_in(t.total_profile) for t in self.task_managers.values())):
                continue  # a registered TaskManager is big enough
            shape = self.shape_for(r.profile)
            capped = self.total_caps_problem(shape.profile) if shape is not None and r.profile is not None else None
            if capped is not None:
                assert r.profile is not None
                return (
                    f"{job}: slot sharing group '{r.slot_sharing_group}' asks for slots of {r.profile.describe()}; no registered "
                    f"TaskManager is that big and a new one ({shape.profile.describe() if shape else ''}) would exceed {capped}. "
                    "Lower the group's resources (SlotSharingGroup) or raise the cap"
                )
            if shape is None:
                assert r.profile is not None and self.max_task_manager_profile is not None
                return (
                    f"{job}: slot sharing group '{r.slot_sharing_group}' asks for slots of {r.profile.describe()}, "
                    f"but the largest TaskManager this cluster may start has {self.max_task_manager_profile.describe()}. "
                    "Lower the group's resources (SlotSharingGroup) or start the cluster with a larger max_task_manager_profile"
                )
        if self.max_task_managers is None:
            return None
        needed = self._task_managers_needed(requirements)
        if needed > self.max_task_managers:
            slots = sum(r.count for r in requirements)
            dedicated = sum(r.count for r in requirements if r.count > 0 and not serves(self.default_shape.slot_profile, r.profile))
            detail = f" ({dedicated} of them need a TaskManager of their own)" if dedicated else ""
            return (
                f"{job} needs {slots} slots{detail}, i.e. {needed} TaskManagers, but this cluster may start at most "
                f"{self.max_task_managers} TaskManagers with {self.slots_per_tm} slot(s) each. Lower the job's parallelism, "
                "or start the cluster with more TaskManagers (max_task_managers) or slots per TaskManager"
            )
        return None

    def _task_managers_needed(self, requirements: list[ResourceRequirement]) -> int:
        if self.dynamic:
            return len(self._shapes_for([r.profile for r in requirements for _ in range(r.count)]))
        default_units = sum(r.count for r in requirements if serves(self.default_shape.slot_profile, r.profile))
        dedicated = sum(r.count for r in requirements if not serves(self.default_shape.slot_profile, r.profile))
        return -(-default_units // self.slots_per_tm) + dedicated

    def slot_to_cut(self, profile: ResourceProfile | None, tmr: TaskManagerRegistration | None = None) -> ResourceProfile:
        """Dynamic: the slot a requirement gets, its own profile or (UNKNOWN) the default slot: the
        cluster's (a default TaskManager's total / its slots), or a smaller TaskManager's own."""
        if profile is not None:
            return profile
        default = self.default_shape.slot_profile
        return default.min_with(tmr.default_slot_profile) if tmr is not None else default

    def _shapes_for(self, unmet: list[ResourceProfile | None]) -> list[TaskManagerShape]:
        """The TaskManagers to start for these slots: default ones packed (dynamic: by resources, first
        fit; static: `slots_per_tm` slots each), the rest one TaskManager sized to each."""
        wanted: list[TaskManagerShape] = []
        room: list[ResourceProfile] = []  # dynamic: what is left of each new default TaskManager
        default_units = 0
        for profile in unmet:
            shape = self.shape_for(profile)
            if shape is None:
                continue  # rejected at declaration; never started
            if shape != self.default_shape:
                wanted.append(shape)
            elif not self.dynamic:
                default_units += 1
            else:
                cut = self.slot_to_cut(profile)
                i = next((i for i, r in enumerate(room) if cut.fits_in(r)), None)
                if i is None:
                    room.append(self.default_shape.profile)
                    i = len(room) - 1
                room[i] = room[i].subtract(cut)
        n_default = len(room) if self.dynamic else -(-default_units // self.slots_per_tm)
        return [self.default_shape] * n_default + wanted

    def shape_for(self, profile: ResourceProfile | None) -> TaskManagerShape | None:
        """The TaskManager to start for one slot of `profile`; None if no TaskManager may be that big."""
        if serves(self.default_shape.slot_profile, profile):
            return self.default_shape
        assert profile is not None
        if self.dynamic and profile.fits_in(self.default_shape.profile):
            return self.default_shape  # cut from a default TaskManager
        assert profile is not None
        limit = self.max_task_manager_profile
        if limit is not None and not profile.fits_in(limit):
            return None
        # one slot sized to the requirement; dimensions it leaves small get the default slot's share
        total = profile.max_with(self.default_shape.slot_profile)
        return TaskManagerShape(total.min_with(limit) if limit is not None else total, 1)

    # decisions --------------------------------------------------------------------------------
    def check(self, may_start: bool = True) -> ResourceDecision:
        """Match free slots to missing requirements; say which TaskManagers to start and release.

        `may_start` False (starts are backing off after failures): start nothing, and release no
        idle TaskManager to make room for one.
        """
        decision = ResourceDecision()
        entries = self._entries_in_match_order()
        for req, entry in entries:
            while entry.missing > 0:
                slot = self._take_free_slot(entry.profile)
                if slot is None:
                    break
                tmr, info = slot
                alloc_id = uuid.uuid4().hex
                info.state, info.allocation_id, info.job_id, info.pending = SlotState.ALLOCATED, alloc_id, req.job_id, True
                tmr.idle_since = None
                entry.allocations.add(alloc_id)
                decision.allocations.append(
                    Allocation(
                        tmr.tm_id, info.index, alloc_id, req.job_id, req.job_master_endpoint, info.profile if tmr.dynamic else None,
                        declared=entry.profile is not None,
                    )
                )

        # what pending TaskManagers will serve once they register (same order; static: best fit
        # among their slots, dynamic: cut from the first with room)
        pending_slots = [p.shape.slot_profile for p in self.pending_task_managers.values() for _ in range(p.shape.num_slots)]
        pending_room = [p.shape.profile for p in self.pending_task_managers.values()]
        unmet: list[ResourceProfile | None] = []
        for _req, entry in entries:
            for _ in range(entry.missing_to_start):
                if self.dynamic:
                    cut = self.slot_to_cut(entry.profile)
                    i = next((i for i, r in enumerate(pending_room) if cut.fits_in(r)), None)
                    if i is None:
                        unmet.append(entry.profile)
                    else:
                        pending_room[i] = pending_room[i].subtract(cut)
                    continue
                i = _best_fit_index(pending_slots, entry.profile)
                if i is None:
                    unmet.append(entry.profile)
                else:
                    pending_slots.pop(i)

        wanted = self._shapes_for(unmet)
        # keep-alive: never fewer than the minimum (a lost TaskManager gets a replacement)
        existing = len(self.task_managers) + len(self.pending_task_managers)
        wanted += [self.default_shape] * max(0, self.min_task_managers - existing - len(wanted))

        if not may_start:
            wanted = []
        if self.max_task_managers is not None:
            room = self.max_task_managers - existing
            if len(wanted) > room:
                # make room: release idle TaskManagers, which no missing requirement fits (else
                # they would have been allocated above); each is replaced by a useful one
                idle = self._idle_task_managers()
                reclaim = idle[: len(wanted) - max(room, 0)] if unmet else []
                decision.release.extend(t.tm_id for t in reclaim)
                room += len(reclaim)
            wanted = wanted[: max(0, room)]
        decision.start = self._within_total_caps(wanted)

        # release TaskManagers idle for too long, down to the minimum
        if self.idle_timeout_s is not None:
            now = self.clock()
            remaining = existing - len(decision.release) + len(decision.start)
            for tmr in self._idle_task_managers():
                if remaining <= self.min_task_managers:
                    break
                if tmr.tm_id in decision.release or tmr.idle_since is None or now - tmr.idle_since < self.idle_timeout_s:
                    continue
                decision.release.append(tmr.tm_id)
                remaining -= 1
        return decision

    def _entries_in_match_order(self) -> list[tuple[JobRequirement, RequirementEntry]]:
        """Requirements with a profile first (biggest first), then UNKNOWN ones; jobs in declaration order."""
        entries = [(r, e) for r in self.requirements.values() if not r.suspended for e in r.entries]
        return sorted(entries, key=lambda re: (re[1].profile is None, tuple(-x for x in re[1].profile.sort_key()) if re[1].profile else ()))

    def _within_total_caps(self, wanted: list[TaskManagerShape]) -> list[TaskManagerShape]:
        """Drop the TaskManagers that would take the cluster over max_total_cpu / max_total_memory_mb."""
        if self.max_total_cpu is None and self.max_total_memory_mb is None:
            return wanted
        total = ResourceProfile.zero()
        for t in self.task_managers.values():
            total = total.merge(t.total_profile)
        for p in self.pending_task_managers.values():
            total = total.merge(p.shape.profile)
        kept = []
        for shape in wanted:
            after = total.merge(shape.profile)
            if (self.max_total_cpu is not None and after.cpu_cores > self.max_total_cpu + 1e-9) or (
                self.max_total_memory_mb is not None and _memory_mb(after) > self.max_total_memory_mb
            ):
                continue
            kept.append(shape)
            total = after
        return kept

    def total_caps_problem(self, profile: ResourceProfile) -> str | None:
        """Why one TaskManager of `profile` could never be started under the total caps; None if it could."""
        if self.max_total_cpu is not None and profile.cpu_cores > self.max_total_cpu + 1e-9:
            return f"slotmanager.max-total-resource.cpu is {self.max_total_cpu:g}"
        if self.max_total_memory_mb is not None and _memory_mb(profile) > self.max_total_memory_mb:
            return f"slotmanager.max-total-resource.memory is {self.max_total_memory_mb} MB"
        return None

    def _take_free_slot(self, profile: ResourceProfile | None) -> tuple[TaskManagerRegistration, SlotInfo] | None:
        """A free slot for `profile`: packing takes the first TaskManager with room (static: the
        smallest fitting slot), spreading the least used one."""
        if self.dynamic:
            fits = [t for t in self.task_managers.values() if t.can_cut(self.slot_to_cut(profile, t))]
            if not fits:
                return None
            tmr = min(fits, key=lambda t: t.utilization) if self.evenly_spread_out_slots else fits[0]
            return tmr, tmr.cut(self.slot_to_cut(profile, tmr))
        best: tuple[TaskManagerRegistration, SlotInfo] | None = None
        for tmr in self.task_managers.values():
            for info in tmr.free_slots():
                if not serves(info.profile, profile):
                    continue
                if best is None or self._better_static(tmr, info, *best):
                    best = (tmr, info)
        return best

    def _better_static(self, tmr: TaskManagerRegistration, info: SlotInfo, best_tmr: TaskManagerRegistration, best: SlotInfo) -> bool:
        if self.evenly_spread_out_slots and tmr is not best_tmr:
            used, best_used = len(tmr.slots) - len(tmr.free_slots()), len(best_tmr.slots) - len(best_tmr.free_slots())
            if used != best_used:
                return used < best_used
        return info.profile.sort_key() < best.profile.sort_key()

    def _idle_task_managers(self) -> list[TaskManagerRegistration]:
        """Registered TaskManagers with every slot free, longest idle first."""
        idle = [t for t in self.task_managers.values() if t.is_idle and t.idle_since is not None]
        return sorted(idle, key=lambda t: t.idle_since or 0.0)

    @property
    def total_slots(self) -> int:
        return sum(t.slot_count for t in self.task_managers.values())

    @property
    def free_slots(self) -> int:
        return sum(len(t.free_slots()) for t in self.task_managers.values())


def _memory_mb(profile: ResourceProfile) -> int:
    return profile.task_heap_mb + profile.task_off_heap_mb + profile.managed_memory_mb


def _key(profile: ResourceProfile | None) -> tuple[float, int, int, int] | None:
    return profile.sort_key() if profile is not None else None


def _best_fit_index(slots: list[ResourceProfile], wanted: ResourceProfile | None) -> int | None:
    best: int | None = None
    for i, p in enumerate(slots):
        if serves(p, wanted) and (best is None or p.sort_key() < slots[best].sort_key()):
            best = i
    return best
