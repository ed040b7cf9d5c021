"""Slot sharing: subtask i of every vertex in a sharing group goes into the group's shared slot i.

Subtasks of different vertices share a slot; two subtasks of one vertex never do (index i is
unique per vertex). A job thus needs, per sharing group, as many slots as its highest parallelism
(Flink: SlotSharingExecutionSlotAllocator with LocalInputPreferredSlotSharingStrategy, simplified).

With fine-grained resources each group also has a resource profile (Flink: SlotSharingGroup's
ResourceProfile): its shared slots must be at least that big. A group without one asks for the
UNKNOWN profile, which any slot serves. `job_resource_requirements` is the one place that turns a
JobGraph into what the job asks of the ResourceManager (the Dispatcher checks it at submission,
the JobMaster declares it).
"""
from __future__ import annotations

from runtime.core.errors import NoResourceAvailableError
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.graph.job_graph import JobGraph, ResourceSpec
from runtime.jobmanager.slot_pool import PhysicalSlot
from runtime.rpc.messages import ResourceProfile, ResourceRequirement


def slots_per_group(eg: ExecutionGraph) -> dict[str, int]:
    groups: dict[str, int] = {}
    for ejv in eg.job_vertices:
        g = ejv.job_vertex.slot_sharing_group
        groups[g] = max(groups.get(g, 0), ejv.parallelism)
    return groups


def spec_to_profile(spec: ResourceSpec | None) -> ResourceProfile | None:
    """A declared ResourceSpec as a slot requirement; a dimension left unset asks for nothing of it."""
    if spec is None or all(getattr(spec, f) is None for f in ResourceSpec.model_fields):
        return None
    return ResourceProfile(
        cpu_cores=spec.cpu_cores or 0.0, task_heap_mb=spec.task_heap_mb or 0, managed_memory_mb=spec.managed_memory_mb or 0,
        task_off_heap_mb=spec.task_off_heap_mb or 0,
    )


def group_resource_profiles(job_graph: JobGraph) -> dict[str, ResourceProfile | None]:
    """Per slot sharing group: its declared resources, else the sum over its vertices', else UNKNOWN (None)."""
    return {g: spec_to_profile(spec) for g, spec in job_graph.group_resources().items()}


def job_resource_requirements(job_graph: JobGraph) -> list[ResourceRequirement]:
    """What the job asks of the ResourceManager: per sharing group, its highest parallelism in slots of its profile."""
    counts: dict[str, int] = {}
    for v in job_graph.vertices:
        counts[v.slot_sharing_group] = max(counts.get(v.slot_sharing_group, 0), v.parallelism)
    profiles = group_resource_profiles(job_graph)
    return [ResourceRequirement(slot_sharing_group=g, profile=profiles[g], count=counts[g]) for g in sorted(counts)]


def _best_fit(slots: list[PhysicalSlot], profile: ResourceProfile | None) -> PhysicalSlot | None:
    """The smallest slot that serves `profile`, so bigger ones stay for groups that need them."""
    fitting = [s for s in slots if s.can_serve(profile)]
    if not fitting:
        return None
    return min(fitting, key=lambda s: s.resource_profile.sort_key() if s.resource_profile is not None else (0.0, 0, 0, 0))


def assign_slots(eg: ExecutionGraph, slots: list[PhysicalSlot]) -> dict[ExecutionVertexID, PhysicalSlot]:
    groups = slots_per_group(eg)
    needed = sum(groups.values())
    if len(slots) < needed:
        raise NoResourceAvailableError(f"job {eg.job_id} needs {needed} slots, has {len(slots)}")
    profiles = group_resource_profiles(eg.job_graph)
    remaining = list(slots)
    shared: dict[str, list[PhysicalSlot]] = {}
    # groups with a profile pick first (biggest first): an UNKNOWN group is happy with any leftover
    def biggest_first(g: str) -> tuple[bool, tuple[float, ...], str]:
        profile = profiles.get(g)
        return (profile is None, tuple(-x for x in profile.sort_key()) if profile is not None else (), g)

    order = sorted(groups, key=biggest_first)
    for g in order:
        shared[g] = []
        for _ in range(groups[g]):
            slot = _best_fit(remaining, profiles.get(g))
            if slot is None:
                profile = profiles.get(g)
                raise NoResourceAvailableError(
                    f"job {eg.job_id}: slot sharing group '{g}' needs {groups[g]} slots of "
                    f"{profile.describe() if profile else 'any resources'}, but only {len(shared[g])} of the "
                    f"{len(slots)} slots held fit"
                )
            remaining.remove(slot)
            shared[g].append(slot)
    out: dict[ExecutionVertexID, PhysicalSlot] = {}
    for ev in eg.all_vertices():
        out[ev.id] = shared[ev.job_vertex.slot_sharing_group][ev.subtask_index]
    return out


def least_resource_requirements(job_graph: JobGraph) -> list[ResourceRequirement]:
    """What a job asks for: `job_resource_requirements`, and for a lazily scheduled job (blocking
    exchanges) `min_count` = its widest pipelined region's slots per slot sharing group, because
    later regions reuse the slots of earlier ones: it runs on a cluster that has that many."""
    from runtime.graph.execution_graph import ExecutionGraph
    from runtime.graph.job_graph import ResultPartitionType

    full = job_resource_requirements(job_graph)
    if not any(ds.result_type is ResultPartitionType.BLOCKING for v in job_graph.vertices for ds in v.produced_datasets):
        return full
    eg = ExecutionGraph(job_graph)
    widest: dict[str, int] = {}
    for region in eg.regions:
        keys = {(eg.vertex(v).job_vertex.slot_sharing_group, v.subtask_index) for v in region.vertices}
        for group in {g for g, _ in keys}:
            widest[group] = max(widest.get(group, 0), sum(1 for g, _ in keys if g == group))
    return [r.model_copy(update={"min_count": widest.get(r.slot_sharing_group, r.count)}) for r in full]
