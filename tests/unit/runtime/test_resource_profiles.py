"""Resource profiles, the SlotManager's matching and TaskManager shapes, and scaling with an injected clock."""
from __future__ import annotations

import pytest

from runtime.api.datastream import SlotSharingGroup, StreamExecutionEnvironment
from runtime.core.errors import ConfigurationError, NoResourceAvailableError
from runtime.core.states import SlotState
from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph import ResourceSpec
from runtime.jobmanager.resource_manager import ResourceManagerConfig
from runtime.jobmanager.scheduler.slot_sharing import (
    assign_slots,
    job_resource_requirements,
)
from runtime.jobmanager.slot_manager import SlotManager, TaskManagerShape
from runtime.jobmanager.slot_pool import PhysicalSlot
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages import (
    RegisterTaskExecutor,
    ResourceProfile,
    ResourceRequirement,
    ResourceRequirements,
    SlotReport,
    SlotStatus,
)
from tests.graph_builders import hand_made_job_graph

pytestmark = pytest.mark.unit

P = ResourceProfile


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _register(sm: SlotManager, tm: str, slots: int = 1, profile: ResourceProfile | None = None) -> None:
    sm.register(
        RegisterTaskExecutor(
            tm_id=tm, data_address=DataAddress(tm_id=tm, host="h", port=1), num_slots=slots,
            resource_profile=profile or P().multiply(slots), pid=1, hostname="h",
        )
    )


def _req(count: int, profile: ResourceProfile | None = None, group: str = "default") -> ResourceRequirement:
    return ResourceRequirement(slot_sharing_group=group, profile=profile, count=count)


def _free_all(sm: SlotManager, tm: str) -> None:
    n = len(sm.task_managers[tm].slots)
    for s in sm.task_managers[tm].slots:
        s.pending = False
    sm.report(SlotReport(tm_id=tm, slots=[SlotStatus(slot_index=i, state=SlotState.FREE) for i in range(n)]))


# --- profile arithmetic ---------------------------------------------------------------------------
def test_profile_fits_in_every_dimension() -> None:
    slot = P(cpu_cores=1.0, task_heap_mb=512, managed_memory_mb=128)
    assert P(cpu_cores=1.0, task_heap_mb=512, managed_memory_mb=128).fits_in(slot)
    assert P(cpu_cores=0.5, task_heap_mb=100, managed_memory_mb=0).fits_in(slot)
    assert not P(cpu_cores=1.5, task_heap_mb=100, managed_memory_mb=0).fits_in(slot)
    assert not P(cpu_cores=0.5, task_heap_mb=513, managed_memory_mb=0).fits_in(slot)
    assert not P(cpu_cores=0.5, task_heap_mb=100, managed_memory_mb=129).fits_in(slot)
    # float CPU shares: three tenths fit into 0.3
    assert P(cpu_cores=0.1 + 0.2, task_heap_mb=0, managed_memory_mb=0).fits_in(P(cpu_cores=0.3))


def test_profile_divide_merge_max_min() -> None:
    total = P(cpu_cores=3.0, task_heap_mb=1000, managed_memory_mb=301)
    assert total.divide(3) == P(cpu_cores=1.0, task_heap_mb=333, managed_memory_mb=100)
    assert total.divide(3).multiply(3).fits_in(total)
    assert P(cpu_cores=1, task_heap_mb=10, managed_memory_mb=1).merge(P(cpu_cores=0.5, task_heap_mb=5, managed_memory_mb=2)) == P(
        cpu_cores=1.5, task_heap_mb=15, managed_memory_mb=3
    )
    a, b = P(cpu_cores=4, task_heap_mb=10, managed_memory_mb=1), P(cpu_cores=1, task_heap_mb=20, managed_memory_mb=1)
    assert a.max_with(b) == P(cpu_cores=4, task_heap_mb=20, managed_memory_mb=1)
    assert a.min_with(b) == P(cpu_cores=1, task_heap_mb=10, managed_memory_mb=1)
    with pytest.raises(ValueError):
        total.divide(0)


def test_requirements_message_accepts_a_plain_slot_count_as_unknown_slots() -> None:
    r = ResourceRequirements(job_id="j", job_master_endpoint="jm", slots=3)
    assert r.slots == 3 and [(x.profile, x.count) for x in r.requirements] == [(None, 3)]
    assert ResourceRequirements.model_validate_json(r.model_dump_json()) == r
    assert ResourceRequirements(job_id="j", job_master_endpoint="jm", slots=0).requirements == []


# --- matching ------------------------------------------------------------------------------------
def test_slot_profile_is_the_task_manager_total_divided_among_its_slots() -> None:
    sm = SlotManager(slots_per_tm=2)
    _register(sm, "tm", 2, P(cpu_cores=4, task_heap_mb=2048, managed_memory_mb=512))
    assert [s.profile for s in sm.task_managers["tm"].slots] == [P(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=256)] * 2
    sm.declare("job", "jm", [_req(2, P(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=256))])
    d = sm.check()
    assert len(d.allocations) == 2 and d.start == []
    sm.declare("big", "jm", [_req(1, P(cpu_cores=2.5, task_heap_mb=0, managed_memory_mb=0))])
    assert sm.check().allocations == []  # half of the TaskManager is not enough


def test_unknown_profile_is_matched_by_any_slot_and_profiles_only_by_big_enough_ones() -> None:
    sm = SlotManager(slots_per_tm=1, max_task_managers=2)
    _register(sm, "small", 1, P(cpu_cores=1))
    _register(sm, "large", 1, P(cpu_cores=4))
    # declared first, but the group with a profile picks first: UNKNOWN must not take the only large slot
    sm.declare("any", "jm-any", [_req(1)])
    sm.declare("heavy", "jm-heavy", [_req(1, P(cpu_cores=3, task_heap_mb=0, managed_memory_mb=0), "heavy")])
    by_job = {a.job_id: a.tm_id for a in sm.check().allocations}
    assert by_job == {"heavy": "large", "any": "small"}


def test_a_requirement_prefers_the_smallest_slot_that_fits() -> None:
    sm = SlotManager(slots_per_tm=1)
    _register(sm, "huge", 1, P(cpu_cores=8))
    _register(sm, "mid", 1, P(cpu_cores=2))
    sm.declare("job", "jm", [_req(1, P(cpu_cores=1.5, task_heap_mb=0, managed_memory_mb=0))])
    assert [a.tm_id for a in sm.check().allocations] == ["mid"]


# --- shapes to request -------------------------------------------------------------------------------
def test_requests_default_task_managers_when_a_default_slot_fits() -> None:
    sm = SlotManager(slots_per_tm=2)
    assert sm.default_shape == TaskManagerShape(P(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=256), 2)
    sm.declare("job", "jm", [_req(2), _req(1, P(cpu_cores=0.5, task_heap_mb=256, managed_memory_mb=0), "light")])
    assert sm.check().start == [sm.default_shape] * 2  # three default-slot units, two per TaskManager


def test_requests_a_one_slot_task_manager_sized_to_a_bigger_requirement() -> None:
    sm = SlotManager(slots_per_tm=1, max_task_manager_profile=P(cpu_cores=8, task_heap_mb=8192, managed_memory_mb=4096))
    sm.declare("job", "jm", [_req(2, P(cpu_cores=3, task_heap_mb=0, managed_memory_mb=0), "heavy"), _req(1)])
    d = sm.check()
    # dimensions the requirement leaves small get the default slot's share
    heavy = TaskManagerShape(P(cpu_cores=3, task_heap_mb=512, managed_memory_mb=128), 1)
    assert sorted(d.start, key=lambda s: s.profile.cpu_cores) == [sm.default_shape, heavy, heavy]
    # once requested, pending TaskManagers of that shape cover the requirement: no second request
    for i, shape in enumerate(d.start):
        sm.add_pending(f"tm{i}", shape)
    assert sm.check().start == []
    # a pending default TaskManager does not cover a heavy requirement
    sm.pending_task_managers = {k: v for k, v in sm.pending_task_managers.items() if v.shape == sm.default_shape}
    assert sm.check().start == [heavy, heavy]


def test_requirement_beyond_the_largest_task_manager_is_unsatisfiable_with_a_clear_message() -> None:
    sm = SlotManager(slots_per_tm=1, max_task_manager_profile=P(cpu_cores=4, task_heap_mb=4096, managed_memory_mb=1024))
    reqs = [_req(1, P(cpu_cores=16, task_heap_mb=0, managed_memory_mb=0), "gpu-ish")]
    problem = sm.capacity_problem("job j1 'train'", reqs)
    assert problem is not None
    for part in ("job j1 'train'", "'gpu-ish'", "16 CPU", "4 CPU, 4096 MB task heap", "max_task_manager_profile"):
        assert part in problem
    assert sm.capacity_problem("job j1", [_req(1, P(cpu_cores=4, task_heap_mb=4096, managed_memory_mb=1024))]) is None
    assert sm.shape_for(P(cpu_cores=16, task_heap_mb=0, managed_memory_mb=0)) is None


def test_more_slots_than_max_task_managers_can_ever_hold_is_unsatisfiable() -> None:
    sm = SlotManager(slots_per_tm=2, max_task_managers=2)
    assert sm.capacity_problem("job j", [_req(4)]) is None
    problem = sm.capacity_problem("job j", [_req(3), _req(2, group="other")])
    assert problem is not None and "needs 5 slots" in problem and "at most 2 TaskManagers with 2 slot(s)" in problem
    # dedicated (one-slot) TaskManagers count one each
    big = P(cpu_cores=3, task_heap_mb=0, managed_memory_mb=0)
    assert sm.capacity_problem("job j", [_req(2, big)]) is None
    assert "need a TaskManager of their own" in (sm.capacity_problem("job j", [_req(2, big), _req(1)]) or "")
    assert SlotManager(slots_per_tm=1).capacity_problem("job j", [_req(1000)]) is None  # no cap


# --- scaling -----------------------------------------------------------------------------------------
def test_scale_up_when_requirements_exceed_free_slots() -> None:
    sm = SlotManager(slots_per_tm=1)
    _register(sm, "tm0")
    sm.declare("job", "jm", 3)
    d = sm.check()
    assert [a.tm_id for a in d.allocations] == ["tm0"] and d.start == [sm.default_shape] * 2
    sm.add_pending("tm1", sm.default_shape)
    sm.add_pending("tm2", sm.default_shape)
    sm.declare("job2", "jm2", 1)  # a second job beyond what is free and pending
    assert sm.check().start == [sm.default_shape]


def test_max_task_managers_caps_requests() -> None:
    sm = SlotManager(slots_per_tm=1, max_task_managers=3)
    _register(sm, "tm0")
    sm.declare("job", "jm", 6)
    assert len(sm.check().start) == 2
    sm.add_pending("tm1", sm.default_shape)
    sm.add_pending("tm2", sm.default_shape)
    assert sm.check().start == []


def test_idle_task_managers_are_released_after_the_timeout_down_to_the_minimum() -> None:
    clock = FakeClock()
    sm = SlotManager(slots_per_tm=1, min_task_managers=1, idle_timeout_s=30.0, clock=clock)
    for tm in ("tm0", "tm1", "tm2"):
        _register(sm, tm)
    sm.declare("job", "jm", 1)
    (busy,) = sm.check().allocations
    clock.now += 29.9
    assert sm.check().release == []  # not idle long enough
    clock.now += 0.2
    released = sm.check().release
    # the two idle ones go, the busy one stays (and counts towards the minimum)
    assert sorted(released) == sorted({"tm0", "tm1", "tm2"} - {busy.tm_id})
    for tm in released:
        sm.unregister(tm)
    sm.declare("job", "jm", 0)
    _free_all(sm, busy.tm_id)
    clock.now += 31
    assert sm.check().release == []  # the last one is the minimum


def test_idle_clock_restarts_when_a_task_manager_gets_work() -> None:
    clock = FakeClock()
    sm = SlotManager(slots_per_tm=1, idle_timeout_s=10.0, clock=clock)
    _register(sm, "tm0")
    clock.now += 9
    sm.declare("job", "jm", 1)
    sm.check()
    clock.now += 100
    assert sm.check().release == []  # in use
    sm.declare("job", "jm", 0)
    _free_all(sm, "tm0")
    clock.now += 9
    assert sm.check().release == []
    clock.now += 2
    assert sm.check().release == ["tm0"]


def test_never_released_without_a_timeout() -> None:
    clock = FakeClock()
    sm = SlotManager(slots_per_tm=1, clock=clock)
    _register(sm, "tm0")
    clock.now += 1e6
    assert sm.check().release == []


def test_a_lost_task_manager_is_replaced_below_the_minimum() -> None:
    sm = SlotManager(slots_per_tm=1, min_task_managers=2)
    assert sm.check().start == [sm.default_shape] * 2  # brought up to the minimum
    _register(sm, "tm0")
    _register(sm, "tm1")
    assert sm.check().start == []
    sm.unregister("tm1")
    assert sm.check().start == [sm.default_shape]


def test_at_the_cap_an_idle_task_manager_makes_room_for_the_shape_a_job_needs() -> None:
    sm = SlotManager(
        slots_per_tm=1, max_task_managers=1, min_task_managers=1, max_task_manager_profile=P(cpu_cores=4, task_heap_mb=4096, managed_memory_mb=1024)
    )
    _register(sm, "default-tm")
    sm.declare("job", "jm", [_req(1, P(cpu_cores=2, task_heap_mb=0, managed_memory_mb=0), "heavy")])
    d = sm.check()
    assert d.release == ["default-tm"]
    assert d.start == [TaskManagerShape(P(cpu_cores=2, task_heap_mb=512, managed_memory_mb=128), 1)]


def test_redeclaring_keeps_allocations_of_unchanged_groups() -> None:
    sm = SlotManager(slots_per_tm=1)
    _register(sm, "tm0")
    sm.declare("job", "jm", [_req(1, group="a"), _req(1, group="b")])
    assert len(sm.check().allocations) == 1
    sm.declare("job", "jm", [_req(1, group="a"), _req(1, group="b")])
    assert sm.requirements["job"].missing == 1


# --- the job's side ---------------------------------------------------------------------------------
def _program() -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    heavy = SlotSharingGroup.builder("heavy").set_cpu_cores(2.0).set_task_heap_memory_mb(256).build()
    src = env.from_collection([1, 2, 3])
    # the PyFlink pattern: the same group named on two operators, which declares it once
    mapped = src.map(lambda x: x).slot_sharing_group(heavy).map(lambda x: x + 1).slot_sharing_group(heavy)
    mapped.map(lambda x: x).set_parallelism(3).slot_sharing_group("plain").print()
    return env


def test_job_requirements_per_slot_sharing_group() -> None:
    jg = _program().get_job_graph("resources")
    reqs = {r.slot_sharing_group: r for r in job_resource_requirements(jg)}
    assert reqs["heavy"].profile == P(cpu_cores=2.0, task_heap_mb=256, managed_memory_mb=0)
    assert reqs["heavy"].count == 2
    assert reqs["plain"].profile is None and reqs["plain"].count == 3
    assert sum(r.count for r in reqs.values()) == jg.slots_required()


def test_vertex_resources_without_group_declaration_are_summed_per_group() -> None:
    jg = hand_made_job_graph([("a", 1), ("b", 2)], [])
    jg.vertices[0].resources = ResourceSpec(cpu_cores=1.0)
    jg.vertices[1].resources = ResourceSpec(cpu_cores=0.5, managed_memory_mb=64)
    (req,) = job_resource_requirements(jg)
    assert (req.profile, req.count) == (P(cpu_cores=1.5, task_heap_mb=0, managed_memory_mb=64), 2)


def _slot(i: int, profile: ResourceProfile) -> PhysicalSlot:
    return PhysicalSlot(f"a{i}", f"tm{i}", 0, DataAddress(tm_id=f"tm{i}", host="h", port=1000 + i), profile)


def test_assign_slots_gives_a_group_with_a_profile_a_slot_that_fits() -> None:
    eg = ExecutionGraph(_program().get_job_graph("resources"))
    small = [_slot(i, P()) for i in range(4)]  # source (1, default) + 'plain' (3)
    big = [_slot(10 + i, P(cpu_cores=2, task_heap_mb=512, managed_memory_mb=128)) for i in range(2)]
    placement = assign_slots(eg, small + big)  # the big slots come last
    heavy_slots = {placement[ev.id].allocation_id for ev in eg.all_vertices() if ev.job_vertex.slot_sharing_group == "heavy"}
    assert heavy_slots == {"a10", "a11"}
    with pytest.raises(NoResourceAvailableError, match="'heavy' needs 2 slots of 2 CPU"):
        assign_slots(eg, [_slot(i, P()) for i in range(6)])


def test_resource_manager_config_rejects_a_default_task_manager_above_the_maximum() -> None:
    with pytest.raises(ConfigurationError, match="larger than max_task_manager_profile"):
        ResourceManagerConfig(slots_per_tm=4, max_task_manager_profile=P(cpu_cores=2, task_heap_mb=8192, managed_memory_mb=8192))
    with pytest.raises(ConfigurationError, match="min_task_managers"):
        ResourceManagerConfig(min_task_managers=3, max_task_managers=2)


def test_while_starts_back_off_nothing_is_started_and_no_idle_task_manager_is_reclaimed() -> None:
    sm = SlotManager(
        slots_per_tm=1, max_task_managers=1, min_task_managers=1, max_task_manager_profile=P(cpu_cores=4, task_heap_mb=4096, managed_memory_mb=1024)
    )
    _register(sm, "default-tm")
    sm.declare("job", "jm", [_req(1, P(cpu_cores=2, task_heap_mb=0, managed_memory_mb=0), "heavy")])
    d = sm.check(may_start=False)
    # releasing the idle one now would leave the cluster with neither it nor its replacement
    assert d.start == [] and d.release == []
    assert sm.check().release == ["default-tm"]


def test_idle_timeouts_still_release_while_starts_back_off() -> None:
    clock = FakeClock()
    sm = SlotManager(slots_per_tm=1, idle_timeout_s=10.0, clock=clock)
    _register(sm, "tm0")
    sm.declare("other", "jm", [_req(1, P(cpu_cores=64, task_heap_mb=0, managed_memory_mb=0), "huge")])
    clock.now += 11
    d = sm.check(may_start=False)
    assert d.start == [] and d.release == ["tm0"]
