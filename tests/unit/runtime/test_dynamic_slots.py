"""Dynamic slots (fine-grained resources, FLIP-156): the SlotManager cuts each slot to its group's
profile from a TaskManager's free resources and takes it back when freed; spread and pack; new
TaskManagers packed by resources and capped by the total caps; the TaskManager's slot table
agrees; the per-slot task heap check walks only the slots' own objects."""
from __future__ import annotations

import pytest

from runtime.core.errors import MillraceError
from runtime.core.states import SlotState
from runtime.jobmanager.slot_manager import SlotManager
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages import RegisterTaskExecutor, ResourceProfile, ResourceRequirement, SlotReport, SlotStatus
from runtime.taskmanager.heap_size import HeapWalker
from runtime.taskmanager.memory import RunningTask, SlotHeap, SlotHeapCheck
from runtime.taskmanager.task_slot_table import TaskSlotTable

pytestmark = pytest.mark.unit

P = ResourceProfile
LARGE = P(cpu_cores=4, task_heap_mb=2048, managed_memory_mb=512)
HEAVY = P(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=256)
LIGHT = P(cpu_cores=1, task_heap_mb=512, managed_memory_mb=128)


def _sm(**kw: object) -> SlotManager:
    return SlotManager(slots_per_tm=4, task_manager_profile=LARGE, dynamic=True, **kw)  # type: ignore[arg-type]  # keyword options


def _register(sm: SlotManager, tm: str, profile: ResourceProfile = LARGE, slots: int = 4) -> None:
    sm.register(RegisterTaskExecutor(
        tm_id=tm, data_address=DataAddress(tm_id=tm, host="h", port=1), num_slots=slots, resource_profile=profile, pid=1, hostname="h",
    ))


def _req(count: int, profile: ResourceProfile | None = None, group: str = "g") -> list[ResourceRequirement]:
    return [ResourceRequirement(slot_sharing_group=group, profile=profile, count=count)]


def _held(sm: SlotManager, tm: str) -> list[SlotStatus]:
    return [
        SlotStatus(slot_index=s.index, state=SlotState.ACTIVE, allocation_id=s.allocation_id, job_id=s.job_id, resource_profile=s.profile)
        for s in sm.task_managers[tm].slots
    ]


def test_slots_are_cut_to_each_profile_and_their_resources_come_back_when_freed() -> None:
    sm = _sm(max_task_managers=1)
    _register(sm, "tm")
    sm.declare("a", "jm-a", _req(1, HEAVY))
    sm.declare("b", "jm-b", _req(1, LIGHT))
    allocs = {a.job_id: a for a in sm.check().allocations}
    assert {j: a.profile for j, a in allocs.items()} == {"a": HEAVY, "b": LIGHT} and all(a.declared for a in allocs.values())
    tmr = sm.task_managers["tm"]
    assert tmr.free_profile == P(cpu_cores=1, task_heap_mb=512, managed_memory_mb=128)
    assert tmr.slot_count == 3 and sm.free_slots == 1  # two cut + one default slot still fits
    sm.declare("c", "jm-c", _req(1, HEAVY))
    assert sm.check().allocations == [] and sm.check().start == []  # no room left, and no second TaskManager allowed
    # a report without a's slot: it was freed on the TaskManager, its resources come back, c fits
    held = [s for s in _held(sm, "tm") if s.job_id != "a"]
    for s in tmr.slots:
        s.pending = False
    sm.report(SlotReport(tm_id="tm", slots=held))
    assert sm.requirements["a"].missing == 1  # a lost its slot (it would ask again)
    sm.declare("a", "jm-a", [])
    (c,) = sm.check().allocations
    assert (c.job_id, c.profile) == ("c", HEAVY) and tmr.free_profile == P(cpu_cores=1, task_heap_mb=512, managed_memory_mb=128)


def test_an_unknown_requirement_gets_the_default_slot_and_a_slot_the_manager_does_not_know_is_adopted() -> None:
    sm = _sm()
    _register(sm, "tm")
    sm.declare("j", "jm", _req(2))
    allocs = sm.check().allocations
    assert [a.profile for a in allocs] == [LIGHT, LIGHT] and not any(a.declared for a in allocs)  # LARGE / 4
    # after a failover the ResourceManager learns the slots from the report
    sm2 = _sm()
    _register(sm2, "tm")
    sm2.report(SlotReport(tm_id="tm", slots=[SlotStatus(slot_index=3, state=SlotState.ACTIVE, allocation_id="x", job_id="j", resource_profile=HEAVY)]))
    assert sm2.task_managers["tm"].free_profile == P(cpu_cores=2, task_heap_mb=1024, managed_memory_mb=256)


def test_pack_takes_the_first_task_manager_with_room_and_spread_the_least_used() -> None:
    for spread, expected in ((False, ["tm1", "tm1", "tm1", "tm1"]), (True, ["tm1", "tm2", "tm1", "tm2"])):
        sm = _sm(evenly_spread_out_slots=spread)
        _register(sm, "tm1")
        _register(sm, "tm2")
        sm.declare("j", "jm", _req(4))
        assert [a.tm_id for a in sm.check().allocations] == expected, spread


def test_new_task_managers_are_packed_by_resources_and_stay_under_the_total_caps() -> None:
    sm = _sm()
    # 2 heavy + 4 light slots: 4 + 4 CPU -> two default TaskManagers of 4 CPU (static slots would need 3 heavy-shaped ones)
    sm.declare("j", "jm", [*_req(2, HEAVY, "heavy"), *_req(4, LIGHT, "light")])
    assert sm.check().start == [sm.default_shape] * 2
    capped = _sm(max_total_cpu=6.0)
    capped.declare("j", "jm", [*_req(2, HEAVY, "heavy"), *_req(4, LIGHT, "light")])
    assert capped.check().start == [capped.default_shape]  # a second one would make 8 CPU
    too_big = P(cpu_cores=8, task_heap_mb=512, managed_memory_mb=0)
    problem = _sm(max_task_manager_profile=P(cpu_cores=16, task_heap_mb=8192, managed_memory_mb=2048), max_total_cpu=6.0) \
        .capacity_problem("job j", _req(1, too_big, "huge"))
    assert problem is not None and "'huge'" in problem and "slotmanager.max-total-resource.cpu is 6" in problem


def test_the_task_managers_slot_table_cuts_and_gives_back_the_same_way() -> None:
    table = TaskSlotTable(4, "tm", LARGE)
    a = table.allocate("a", "ja", HEAVY, declared=True)
    b = table.allocate("b", "jb", LIGHT)
    assert (a.index, b.index, a.declared, b.declared) == (0, 1, True, False)
    assert table.free_profile() == P(cpu_cores=1, task_heap_mb=512, managed_memory_mb=128)
    with pytest.raises(MillraceError, match=r"cannot give allocation c of job jc a slot of 2 CPU.*only 1 CPU, 512 MB task heap, 128 MB managed memory"):
        table.allocate("c", "jc", HEAVY)
    table.start_release("a")
    table.finish_release(a)
    assert table.free_profile() == P(cpu_cores=3, task_heap_mb=1536, managed_memory_mb=384)
    assert table.allocate("c", "jc", HEAVY).index == 0  # the lowest free index again
    report = {s.allocation_id: s.resource_profile for s in table.report() if s.allocation_id}
    assert report == {"c": HEAVY, "b": LIGHT}


class _Op:
    def __init__(self, mb: int) -> None:
        self.kept = [bytes(1 << 20) for _ in range(mb)]


def test_the_slot_heap_check_walks_only_when_memory_grew_and_fails_only_the_slot_over_its_budget() -> None:
    rss = [200.0]
    now = [0.0]
    failed: list[tuple[str, str]] = []

    def task(name: str) -> RunningTask:
        return RunningTask(name, name, lambda error: failed.append((name, str(error()))) is None)

    hog, fine = _Op(40), _Op(2)
    slots = [
        SlotHeap(0, "hog-job", 32, [task("hog (1/1)")], [("hog (1/1)", "hoarding map", hog)]),
        SlotHeap(1, "fine-job", 128, [task("fine (1/1)")], [("fine (1/1)", "map", fine)]),
    ]
    check = SlotHeapCheck("tm", baseline_mb=190.0, read_rss_mb=lambda: rss[0], clock=lambda: now[0], walker=HeapWalker)
    assert not check.due(slots)  # grown 10 MB: below the smallest budget, no slot can be over it
    rss[0] = 260.0
    assert check.due(slots)
    [over] = check.measure(slots)
    assert over.slot.index == 0 and 40 <= over.heap_mb < 42 and over.top_operator == "hoarding map"
    check.fail(over)
    assert [n for n, _ in failed] == ["hog (1/1)"]
    assert "slot 0 of TaskManager tm (job hog-job) holds ~40 MB of Python heap, over its task heap budget of 32 MB" in failed[0][1]
    assert "operator 'hoarding map' of task hog (1/1)" in failed[0][1]
    assert not check.due(slots)  # rate-limited until min_interval_s has passed
    now[0] = 1.0
    assert check.due(slots)
