from __future__ import annotations

import pytest

from runtime.core.errors import MillraceError, NoResourceAvailableError
from runtime.core.states import SlotState
from runtime.graph.execution_graph import ExecutionGraph
from runtime.graph.job_graph_builder import build_job_graph
from runtime.graph.stream_graph_generator import generate_stream_graph
from runtime.jobmanager.scheduler.slot_sharing import assign_slots, slots_per_group
from runtime.jobmanager.slot_manager import SlotManager
from runtime.jobmanager.slot_pool import PhysicalSlot
from runtime.rpc.deployment import DataAddress
from runtime.rpc.messages import RegisterTaskExecutor, SlotReport, SlotStatus
from runtime.taskmanager.task_slot_table import TaskSlotTable
from tests.graph_builders import one, sink, source

pytestmark = pytest.mark.unit


def _graph(src_p: int, map_p: int, sink_p: int, map_group: str | None = None) -> ExecutionGraph:
    s = source("src", src_p)
    m = one(s, "map", map_p, slot_sharing_group=map_group)
    k = sink(m, "sink", sink_p)
    return ExecutionGraph(build_job_graph(generate_stream_graph([k], "j", 1)))


def _slots(n: int) -> list[PhysicalSlot]:
    return [PhysicalSlot(f"a{i}", f"tm{i}", 0, DataAddress(tm_id=f"tm{i}", host="127.0.0.1", port=1000 + i)) for i in range(n)]


def test_shared_slots_hold_one_subtask_per_vertex() -> None:
    eg = _graph(2, 4, 3)
    assert slots_per_group(eg) == {"default": 4}
    placement = assign_slots(eg, _slots(4))
    per_slot: dict[str, list] = {}
    for vid, slot in placement.items():
        per_slot.setdefault(slot.allocation_id, []).append(vid.job_vertex_id)
    for vertices in per_slot.values():
        assert len(vertices) == len(set(vertices)), "two subtasks of one vertex share a slot"
    assert len(per_slot) == 4


def test_named_sharing_groups_need_their_own_slots() -> None:
    eg = _graph(2, 3, 2, map_group="heavy")
    # src(2) and sink(2) in default, map(3) in 'heavy' (sink inherits 'heavy' from its input)
    groups = slots_per_group(eg)
    assert sum(groups.values()) == eg.job_graph.slots_required()
    assert groups["heavy"] == 3
    placement = assign_slots(eg, _slots(sum(groups.values())))
    heavy = {placement[v.id].allocation_id for v in eg.all_vertices() if v.job_vertex.slot_sharing_group == "heavy"}
    default = {placement[v.id].allocation_id for v in eg.all_vertices() if v.job_vertex.slot_sharing_group == "default"}
    assert not heavy & default
    with pytest.raises(NoResourceAvailableError, match="needs 5 slots, has 4"):
        assign_slots(eg, _slots(4))


def _register(sm: SlotManager, tm: str, slots: int) -> None:
    sm.register(RegisterTaskExecutor(tm_id=tm, data_address=DataAddress(tm_id=tm, host="h", port=1), num_slots=slots, pid=1, hostname="h"))


def test_slot_manager_requests_task_managers_for_missing_slots_and_allocates_on_registration() -> None:
    sm = SlotManager(slots_per_tm=2)
    sm.declare("job", "jm", 3)
    d = sm.check()
    assert d.allocations == [] and d.start == [sm.default_shape] * 2
    sm.add_pending("tm1", sm.default_shape)
    sm.add_pending("tm2", sm.default_shape)
    d = sm.check()
    assert d.allocations == [] and d.start == []  # pending TaskManagers already cover the need
    _register(sm, "tm1", 2)
    d = sm.check()
    assert len(d.allocations) == 2 and d.start == []
    _register(sm, "tm2", 2)
    allocs = sm.check().allocations
    assert len(allocs) == 1 and sm.free_slots == 1
    # a freed slot reported by the TaskExecutor counts as free again after confirmation
    a = allocs[0]
    sm.confirm(a.tm_id, a.slot_index, a.allocation_id)
    sm.report(SlotReport(tm_id=a.tm_id, slots=[SlotStatus(slot_index=i, state=SlotState.FREE) for i in range(2)]))
    assert sm.requirements["job"].missing == 1
    assert sm.unregister("tm1") == {"job"}
    # lost slots suspend the job's requirement until its JobMaster declares again
    assert sm.requirements["job"].missing == 0 and sm.check().start == []
    sm.declare("job", "jm", 3)
    assert sm.requirements["job"].missing == 3


def test_slot_manager_respects_max_task_managers() -> None:
    sm = SlotManager(slots_per_tm=1, max_task_managers=1)
    sm.declare("job", "jm", 2)
    assert len(sm.check().start) == 1


def test_task_slot_table_lifecycle() -> None:
    t = TaskSlotTable(2, "tm")
    s = t.allocate("a1", "j")
    assert s.state is SlotState.ALLOCATED and t.allocate("a1", "j") is s  # idempotent
    t.add_task("a1", "j", "att1")
    assert s.state is SlotState.ACTIVE
    with pytest.raises(MillraceError, match="no slot allocated"):
        t.add_task("a1", "other-job", "att2")
    t.start_release("a1")
    t.finish_release(s)
    assert s.state is SlotState.RELEASING  # a task still runs in it
    t.remove_task("att1")
    t.finish_release(s)
    assert s.state is SlotState.FREE and s.allocation_id is None
    t.allocate("b", "j")
    t.allocate("c", "j")
    with pytest.raises(MillraceError, match="cannot give allocation d of job j a slot of 1 CPU, 512 MB task heap"):
        t.allocate("d", "j")
