from __future__ import annotations

import pytest

from runtime.core.errors import IllegalStateTransitionError
from runtime.core.states import ExecutionState
from runtime.graph.execution_graph import ConsumedPartition, ExecutionGraph, ExecutionVertexID
from runtime.graph.job_graph import DistributionPattern as DP
from runtime.graph.job_graph import ResultPartitionType as RT
from runtime.graph.job_graph_builder import build_job_graph
from runtime.graph.stream_graph_generator import generate_stream_graph
from tests.graph_builders import hand_made_job_graph, key_by, one, sink, source

pytestmark = pytest.mark.unit


def pointwise(p: int, c: int) -> ExecutionGraph:
    return ExecutionGraph(hand_made_job_graph([("A", p), ("B", c)], [("A", "B", DP.POINTWISE, RT.PIPELINED_BOUNDED)]))


def reads(eg: ExecutionGraph, subtask: int) -> list[tuple[int, int]]:
    """(producer subtask, subpartition) pairs consumer B[subtask] reads."""
    (ci,) = eg.vertex(ExecutionVertexID("B", subtask)).consumed_inputs
    return [(cp.producer.subtask_index, cp.subpartition_index) for cp in ci.partitions]


def test_pointwise_equal_parallelism_one_to_one() -> None:
    eg = pointwise(3, 3)
    assert [reads(eg, i) for i in range(3)] == [[(0, 0)], [(1, 0)], [(2, 0)]]
    assert all(p.num_subpartitions == 1 for p in eg.results["A->B"].partitions)


def test_pointwise_more_producers_than_consumers() -> None:
    eg = pointwise(5, 2)
    # Flink: start = i*5//2, end = (i+1)*5//2 -> [0,2) and [2,5)
    assert reads(eg, 0) == [(0, 0), (1, 0)]
    assert reads(eg, 1) == [(2, 0), (3, 0), (4, 0)]
    assert all(p.num_subpartitions == 1 and len(p.consumers) == 1 for p in eg.results["A->B"].partitions)


def test_pointwise_fewer_producers_than_consumers() -> None:
    eg = pointwise(2, 5)
    # Flink: start = ceil(n*5/2), end = ceil((n+1)*5/2) -> producer 0 feeds [0,3), producer 1 feeds [3,5)
    parts = eg.results["A->B"].partitions
    assert [p.num_subpartitions for p in parts] == [3, 2]
    assert [[c.subtask_index for c in p.consumers] for p in parts] == [[0, 1, 2], [3, 4]]
    assert [reads(eg, i) for i in range(5)] == [[(0, 0)], [(0, 1)], [(0, 2)], [(1, 0)], [(1, 1)]]


def test_all_to_all() -> None:
    eg = ExecutionGraph(hand_made_job_graph([("A", 2), ("B", 3)], [("A", "B", DP.ALL_TO_ALL, RT.BLOCKING)]))
    parts = eg.results["A->B"].partitions
    assert [p.partition_id for p in parts] == ["A->B:0", "A->B:1"]
    assert all(p.num_subpartitions == 3 and len(p.consumers) == 3 for p in parts)
    assert reads(eg, 2) == [(0, 2), (1, 2)]
    cp = eg.vertex(ExecutionVertexID("B", 2)).consumed_inputs[0].partitions[1]
    assert cp == ConsumedPartition("A->B:1", ExecutionVertexID("A", 1), 2)
    assert eg.partition("A->B:1").result_type is RT.BLOCKING


def test_graph_from_program() -> None:
    s = source("Source: events", parallelism=2)
    w = one(key_by(one(s, "Map"), "k"), "Window", keyed=True, parallelism=3, max_parallelism=64)
    jg = build_job_graph(generate_stream_graph([sink(w, parallelism=3)], "job", 2))
    eg = ExecutionGraph(jg)
    assert [ejv.name for ejv in eg.job_vertices] == ["Source: events -> Map", "Window -> Sink: out"]
    assert len(eg.all_vertices()) == 5
    window = eg.job_vertices[1].task_vertices[2]
    assert window.task_name_with_subtask == "Window -> Sink: out (3/3)"
    (ci,) = window.consumed_inputs
    assert ci.target_node_id == w.id and ci.type_number == 0 and len(ci.partitions) == 2
    (result,) = eg.results.values()
    assert result.producer_job_vertex_id == eg.job_vertices[0].id and result.consumer_max_parallelism == 64
    assert result.result_type is RT.PIPELINED_BOUNDED
    producer = eg.job_vertices[0].task_vertices[1]
    assert list(producer.produced_partitions) == [result.id]


def test_execution_attempts_and_states() -> None:
    ticks = iter(range(100))
    jg = hand_made_job_graph([("A", 1)], [])
    eg = ExecutionGraph(jg, clock=lambda: float(next(ticks)))
    ev = eg.vertex(ExecutionVertexID("A", 0))
    first = ev.current_execution
    assert first.state is ExecutionState.CREATED and first.attempt_number == 0
    with pytest.raises(IllegalStateTransitionError):
        first.transition_state(ExecutionState.RUNNING)
    with pytest.raises(IllegalStateTransitionError, match="cannot start a new attempt"):
        ev.reset_for_new_execution()
    for s in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.RUNNING):
        first.transition_state(s)
    first.assigned_resource = "slot-1"
    first.fail(RuntimeError("boom"))
    assert first.state is ExecutionState.FAILED and isinstance(first.failure_info, RuntimeError)
    assert list(first.state_timestamps) == [ExecutionState.CREATED, ExecutionState.SCHEDULED,
                                            ExecutionState.DEPLOYING, ExecutionState.RUNNING, ExecutionState.FAILED]
    assert first.state_timestamps[ExecutionState.FAILED] > first.state_timestamps[ExecutionState.CREATED]
    second = ev.reset_for_new_execution()
    assert second is ev.current_execution and second.attempt_number == 1
    assert second.attempt_id != first.attempt_id and len(second.attempt_id) == 32
    assert ev.prior_executions == [first] and second.assigned_resource is None
