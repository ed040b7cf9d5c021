"""Speculative execution's parts: options, the slow task detector, the blocklist, which vertices may
run concurrent attempts, concurrent attempts of an ExecutionVertex, and their slots."""
from __future__ import annotations

from typing import Any

import pytest

from runtime.core.errors import ConfigurationError, IllegalStateTransitionError
from runtime.core.states import ExecutionState as S
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.graph.job_graph import DistributionPattern as DP
from runtime.graph.job_graph import ResultPartitionType as RT
from runtime.jobmanager.scheduler.slot_allocator import ExecutionSlotAllocator
from runtime.jobmanager.scheduler.speculative import Blocklist, SlowTaskDetector, SpeculationPolicy, SpeculativeOptions
from runtime.jobmanager.slot_pool import PhysicalSlot, SlotPool
from runtime.rpc.deployment import DataAddress
from tests.graph_builders import hand_made_job_graph

pytestmark = pytest.mark.unit
ev = ExecutionVertexID


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def batch_graph(clock: Clock, p: int = 4) -> ExecutionGraph:
    # A(p) =blocking=> B(p) -pipelined-> C(p)
    return ExecutionGraph(hand_made_job_graph(
        [("A", p), ("B", p), ("C", p)],
        [("A", "B", DP.ALL_TO_ALL, RT.BLOCKING), ("B", "C", DP.POINTWISE, RT.PIPELINED_BOUNDED)],
    ), clock=clock)


def run(ex: Any, *states: S) -> None:
    for st in states:
        ex.transition_state(st)


def test_options_take_flinks_keys_and_name_a_bad_value() -> None:
    o = SpeculativeOptions.from_config({
        "execution.batch.speculative.enabled": "true", "execution.batch.speculative.block-slow-node-duration": "30 s",
        "slow-task-detector.check-interval": "200 ms", "slow-task-detector.execution-time.baseline-multiplier": "2",
    })
    assert (o.enabled, o.block_slow_node_s, o.check_interval_s, o.baseline_multiplier) == (True, 30.0, 0.2, 2.0)
    assert (o.max_concurrent_executions, o.baseline_lower_bound_s, o.baseline_ratio) == (2, 60.0, 0.75)  # Flink's defaults
    assert not SpeculativeOptions.from_config({}).enabled
    with pytest.raises(ConfigurationError, match="execution.batch.speculative.enabled"):
        SpeculativeOptions.from_config({"execution.batch.speculative.enabled": "yes please"})
    with pytest.raises(ConfigurationError, match="baseline-ratio"):
        SpeculativeOptions.from_config({"slow-task-detector.execution-time.baseline-ratio": "lots"})
    with pytest.raises(ConfigurationError, match="max_concurrent_executions"):
        SpeculativeOptions.from_config({"execution.batch.speculative.max-concurrent-executions": "1"})


def test_a_subtask_slower_than_the_median_times_the_multiplier_is_slow_once_enough_siblings_finished() -> None:
    clock = Clock()
    eg = batch_graph(clock)
    detector = SlowTaskDetector(SpeculativeOptions(baseline_lower_bound_s=1.0, baseline_multiplier=1.5, baseline_ratio=0.75), clock)
    a = [eg.vertex(ev("A", i)).current_execution for i in range(4)]
    for ex in a:
        run(ex, S.SCHEDULED, S.DEPLOYING, S.INITIALIZING, S.RUNNING)
    for i, took in enumerate([2.0, 4.0]):  # two of four finished: not enough (ratio 0.75)
        clock.now += took
        run(a[i], S.FINISHED)
    assert detector.detect(eg) == {}
    clock.now = 1000.0 + 3.0
    run(a[2], S.FINISHED)  # 2, 4 and 3 s: median 3 s, baseline 4.5 s
    clock.now = 1000.0 + 4.4
    assert detector.detect(eg) == {}
    clock.now = 1000.0 + 4.6
    assert detector.detect(eg) == {ev("A", 3): [a[3]]}
    # with a speculative attempt that is still young, the subtask is not slow any more
    spec = eg.vertex(ev("A", 3)).add_speculative_execution()
    run(spec, S.SCHEDULED, S.DEPLOYING)
    assert detector.detect(eg) == {}
    # the lower bound: never slow before it
    slow_bound = SlowTaskDetector(SpeculativeOptions(baseline_lower_bound_s=60.0, baseline_ratio=0.75), clock)
    assert slow_bound.baseline_s(eg.job_vertex("A").task_vertices, clock.now) == 60.0


def test_concurrent_attempts_of_a_subtask_and_the_first_to_finish_becomes_current() -> None:
    clock = Clock()
    v = batch_graph(clock).vertex(ev("A", 0))
    first = v.current_execution
    run(first, S.SCHEDULED, S.DEPLOYING, S.RUNNING)
    second = v.add_speculative_execution()
    assert second.attempt_number == 1 and v.current_executions() == [first, second]
    assert v.execution(second.attempt_id) is second and v.execution("nope") is None
    run(second, S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.FINISHED)
    assert v.make_current(second) == [first]
    assert v.current_execution is second and v.execution_state is S.FINISHED and not v.all_attempts_ended()
    with pytest.raises(IllegalStateTransitionError, match="RUNNING"):
        v.reset_for_new_execution()  # the loser has not ended
    run(first, S.CANCELING, S.CANCELED)
    assert v.all_attempts_ended()
    third = v.reset_for_new_execution()
    assert third.attempt_number == 2 and v.speculative_executions == [] and v.prior_executions == [first, second]
    with pytest.raises(IllegalStateTransitionError, match="FINISHED"):
        run(third, S.SCHEDULED, S.DEPLOYING, S.RUNNING, S.FINISHED)
        v.add_speculative_execution()


def test_only_vertices_alone_in_their_region_with_sinks_that_take_part_may_speculate() -> None:
    clock = Clock()
    eg = batch_graph(clock)
    policy = SpeculationPolicy(eg, {})
    assert policy.why_not(eg.vertex(ev("A", 0))) is None
    assert "pipelined" in (policy.why_not(eg.vertex(ev("B", 0))) or "")

    class Sink:
        supports_concurrent_execution_attempts = False

    jg = hand_made_job_graph([("A", 2), ("S", 2)], [("A", "S", DP.ALL_TO_ALL, RT.BLOCKING)])
    sink_vertex = next(v for v in jg.vertices if v.name == "S")
    sink_op = sink_vertex.operators[0].model_copy(update={"is_sink": True})
    sink_vertex.operators[0] = sink_op
    eg2 = ExecutionGraph(jg)
    assert "would write once per attempt" in (SpeculationPolicy(eg2, {}).why_not(eg2.vertex(ev("S", 0))) or "")
    assert "does not support" in (SpeculationPolicy(eg2, {sink_op.node_id: Sink()}).why_not(eg2.vertex(ev("S", 0))) or "")
    Sink.supports_concurrent_execution_attempts = True
    assert SpeculationPolicy(eg2, {sink_op.node_id: Sink()}).why_not(eg2.vertex(ev("S", 0))) is None


def _slot(i: int, tm: str) -> PhysicalSlot:
    return PhysicalSlot(f"a{i}", tm, i, DataAddress(tm_id=tm, host="127.0.0.1", port=1))


def test_a_speculative_attempt_gets_a_free_slot_off_the_blocked_and_busy_task_managers() -> None:
    clock = Clock()
    eg = batch_graph(clock, p=2)
    pool = SlotPool(eg.job_id)
    for i, tm in enumerate(["slow", "fast", "other"]):
        pool.offer(_slot(i, tm))
    alloc = ExecutionSlotAllocator(eg, pool, reuse_slots=True)
    blocklist = Blocklist(clock)
    alloc.is_blocked = blocklist.is_blocked
    placed = alloc.allocate([ev("A", 0), ev("A", 1)])
    assert [placed[ev("A", i)].tm_id for i in range(2)] == ["fast", "other"]
    a0 = eg.vertex(ev("A", 0))
    run(a0.current_execution, S.SCHEDULED, S.DEPLOYING, S.RUNNING)
    a0.current_execution.assigned_resource = placed[ev("A", 0)]
    run(eg.vertex(ev("A", 1)).current_execution, S.SCHEDULED, S.DEPLOYING, S.RUNNING)
    blocklist.block("slow", 60.0)
    spec = a0.add_speculative_execution()
    # "fast" runs attempt #0, "other" runs A1, "slow" is blocked
    assert alloc.allocate_speculative(a0.id, spec.attempt_id) is None
    clock.now += 61.0  # the block ran out
    slot = alloc.allocate_speculative(a0.id, spec.attempt_id)
    assert slot is not None and slot.tm_id == "slow"
    # while the speculative attempt runs its slot is not given to anyone else
    run(spec, S.SCHEDULED, S.DEPLOYING, S.RUNNING)
    spec.assigned_resource = slot
    blocklist.block("fast", 60.0)
    a1 = eg.vertex(ev("A", 1))
    a1.current_execution.assigned_resource = placed[ev("A", 1)]
    assert alloc.allocate_speculative(a1.id, a1.add_speculative_execution().attempt_id) is None
    a1.speculative_executions[0].transition_state(S.CANCELED)
    # it wins: its slot becomes the subtask's shared slot; the loser keeps its own until it ended
    run(spec, S.FINISHED)
    a0.make_current(spec)
    alloc.promote(a0.id, spec.attempt_id, a0.speculative_executions[0].attempt_id)
    assert alloc.slot_of(a0.id) is slot
    run(a0.speculative_executions[0], S.CANCELING, S.CANCELED)
    run(eg.vertex(ev("A", 1)).current_execution, S.FINISHED)
    # "fast" is blocked: the next region runs on the two others
    placed = alloc.allocate([ev("B", 0), ev("C", 0), ev("B", 1), ev("C", 1)])
    assert {s.tm_id for s in placed.values()} == {"slow", "other"}
