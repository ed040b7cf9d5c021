"""Pipelined-region scheduling (lazy from sources) and slot reuse for jobs with blocking exchanges."""
from __future__ import annotations

import pytest

from runtime.core.errors import NoResourceAvailableError
from runtime.core.states import ExecutionState
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.graph.job_graph import DistributionPattern as DP
from runtime.graph.job_graph import ResultPartitionType as RT
from runtime.jobmanager.scheduler.slot_allocator import ExecutionSlotAllocator
from runtime.jobmanager.scheduler.slot_sharing import least_resource_requirements
from runtime.jobmanager.scheduler.strategy import PipelinedRegionSchedulingStrategy
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc.deployment import DataAddress
from tests.graph_builders import hand_made_job_graph

pytestmark = pytest.mark.unit
ev = ExecutionVertexID


def batch_graph(p: int = 4) -> ExecutionGraph:
    # A(p) =blocking all-to-all=> B(p) -pipelined pointwise-> C(p)
    return ExecutionGraph(hand_made_job_graph(
        [("A", p), ("B", p), ("C", p)],
        [("A", "B", DP.ALL_TO_ALL, RT.BLOCKING), ("B", "C", DP.POINTWISE, RT.PIPELINED_BOUNDED)],
    ))


def test_regions_are_scheduled_once_their_blocking_inputs_are_committed() -> None:
    eg = batch_graph(2)
    committed: set[str] = set()
    s = PipelinedRegionSchedulingStrategy(eg, committed.__contains__)
    assert s.start_scheduling() == [ev("A", 0), ev("A", 1)]
    committed.add("A->B:0")
    assert s.on_partitions_committed(["A->B:0"]) == []  # B reads both A's partitions
    committed.add("A->B:1")
    assert sorted(s.on_partitions_committed(["A->B:1"])) == [ev("B", 0), ev("B", 1), ev("C", 0), ev("C", 1)]
    assert s.on_partitions_committed([]) == []  # each region once
    # a restarted consumer region comes back at once: its inputs are still committed
    assert sorted(s.restart_tasks({ev("B", 1), ev("C", 1)})) == [ev("B", 1), ev("C", 1)]
    # regions get their slots together
    assert s.deployment_groups([ev("B", 0), ev("C", 0), ev("B", 1), ev("C", 1)]) == [[ev("B", 0), ev("C", 0)], [ev("B", 1), ev("C", 1)]]


def test_a_restarted_region_whose_inputs_are_gone_waits_for_its_producers() -> None:
    eg = batch_graph(2)
    committed = {"A->B:0", "A->B:1"}
    s = PipelinedRegionSchedulingStrategy(eg, committed.__contains__)
    s.start_scheduling()
    s.on_partitions_committed(committed)
    committed.discard("A->B:0")
    assert s.restart_tasks({ev("A", 0), ev("B", 0), ev("C", 0)}) == [ev("A", 0)]
    committed.add("A->B:0")
    assert sorted(s.on_partitions_committed(["A->B:0"])) == [ev("B", 0), ev("C", 0)]


def _slot(i: int) -> PhysicalSlot:
    return PhysicalSlot(f"a{i}", "tm", i, DataAddress(tm_id="tm", host="127.0.0.1", port=1))


def _set_state(eg: ExecutionGraph, vids: list[ExecutionVertexID], *states: ExecutionState) -> None:
    for v in vids:
        for st in states:
            eg.vertex(v).current_execution.transition_state(st)


def test_later_regions_reuse_the_slots_of_ended_ones() -> None:
    eg = batch_graph(4)
    pool = SlotPool("j")
    for i in range(2):
        pool.offer(_slot(i))
    alloc = ExecutionSlotAllocator(eg, pool, reuse_slots=True)
    a = [ev("A", i) for i in range(4)]
    _set_state(eg, a, ExecutionState.SCHEDULED)
    first = {**alloc.allocate([a[0]]), **alloc.allocate([a[1]])}
    assert {s.allocation_id for s in first.values()} == {"a0", "a1"}
    with pytest.raises(NoResourceAvailableError):
        alloc.allocate([a[2]])  # both slots run a task
    _set_state(eg, [a[0]], ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.FINISHED)
    assert alloc.allocate([a[2]])[a[2]].allocation_id == first[a[0]].allocation_id
    # a region of two vertices needs one slot (slot sharing), once one is free
    _set_state(eg, [a[1]], ExecutionState.DEPLOYING, ExecutionState.FAILED)
    region = [ev("B", 3), ev("C", 3)]
    _set_state(eg, region, ExecutionState.SCHEDULED)
    got = alloc.allocate(region)
    assert got[ev("B", 3)] == got[ev("C", 3)] == first[a[1]]


def test_a_batch_job_fits_a_cluster_with_its_widest_region() -> None:
    (req,) = least_resource_requirements(batch_graph(4).job_graph)
    assert (req.count, req.least) == (4, 1)
    streaming = ExecutionGraph(hand_made_job_graph([("A", 4), ("B", 4)], [("A", "B", DP.ALL_TO_ALL, RT.PIPELINED_BOUNDED)]))
    (req,) = least_resource_requirements(streaming.job_graph)
    assert (req.count, req.least) == (4, 4)


def test_a_dynamic_vertex_reads_key_group_ranges_at_the_parallelism_decided_later() -> None:
    from runtime.core.keygroups import compute_key_group_range_for_operator_index

    jg = hand_made_job_graph([("A", 2), ("B", 4)], [("A", "B", DP.ALL_TO_ALL, RT.BLOCKING)])
    b = next(v for v in jg.vertices if v.id == "B")
    b.dynamic_parallelism = True
    eg = ExecutionGraph(jg)
    maxp = b.max_parallelism
    assert all(eg.partition(f"A->B:{i}").num_subpartitions == maxp for i in range(2))  # one per key group
    eg.set_parallelism("B", 3)
    consumers = eg.job_vertex("B").task_vertices
    assert [ev.subtask_index for ev in consumers] == [0, 1, 2] and eg.job_vertex("B").parallelism == 3
    for ev in consumers:
        (ci,) = ev.consumed_inputs
        kgs = compute_key_group_range_for_operator_index(maxp, 3, ev.subtask_index)
        assert sorted({cp.subpartition_index for cp in ci.partitions}) == list(kgs)
        assert {cp.partition_id for cp in ci.partitions} == {"A->B:0", "A->B:1"}
    assert sorted(eg.partition("A->B:0").consumers) == [ev.id for ev in consumers]
    assert len(eg.regions) == 2 + 3
    with pytest.raises(ValueError, match="not decided at runtime"):
        eg.set_parallelism("A", 1)


def test_adaptive_parallelism_from_bytes() -> None:
    from runtime.core.errors import ConfigurationError
    from runtime.jobmanager.scheduler.adaptive_batch import AdaptiveBatchOptions

    o = AdaptiveBatchOptions.from_config({})
    assert o.avg_data_volume_per_task == 16 << 20
    assert [o.decide(b, upper_bound=4, max_parallelism=128) for b in (0, 1, 16 << 20, (16 << 20) + 1, 1 << 40)] == [1, 1, 1, 2, 4]
    o = AdaptiveBatchOptions.from_config({
        "execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "1 mb",
        "execution.batch.adaptive.auto-parallelism.min-parallelism": "2",
        "execution.batch.adaptive.auto-parallelism.max-parallelism": "6",
    })
    assert [o.decide(b, upper_bound=4, max_parallelism=5) for b in (0, 3 << 20, 100 << 20)] == [2, 3, 5]
    with pytest.raises(ConfigurationError, match="avg-data-volume-per-task: 'lots' is not a memory size"):
        AdaptiveBatchOptions.from_config({"execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task": "lots"})
