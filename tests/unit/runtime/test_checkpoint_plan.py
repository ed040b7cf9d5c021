"""The checkpoint plan (FLIP-147, Flink's DefaultCheckpointPlanCalculator): which tasks a checkpoint
triggers, which it waits for, which it records as finished, and when none can be taken."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from runtime.core.states import ExecutionState
from runtime.jobmanager.checkpoint.config import CheckpointCoordinatorConfiguration
from runtime.jobmanager.checkpoint.plan import CheckpointPlan, calculate_checkpoint_plan

R, F = ExecutionState.RUNNING, ExecutionState.FINISHED


@dataclass(frozen=True)
class T:
    vertex_id: str
    subtask_index: int
    state: ExecutionState = R
    upstream: tuple[tuple[str, int], ...] = ()

    def __repr__(self) -> str:
        return f"{self.vertex_id}{self.subtask_index}"


def names(tasks: tuple[T, ...]) -> list[str]:
    return sorted(repr(t) for t in tasks)


def union_job(bounded: ExecutionState = R, unbounded: ExecutionState = R, sink: tuple[ExecutionState, ExecutionState] = (R, R)) -> list[T]:
    """bounded (p=2) and unbounded (p=2) sources, rebalanced (all-to-all) into a sink (p=2)."""
    both = (("b", 0), ("b", 1), ("u", 0), ("u", 1))
    return [
        T("b", 0, bounded), T("b", 1, bounded), T("u", 0, unbounded), T("u", 1, unbounded),
        T("s", 0, sink[0], both), T("s", 1, sink[1], both),
    ]


def plan_of(tasks: list[T], after_finish: bool = True) -> CheckpointPlan[T]:
    plan = calculate_checkpoint_plan(tasks, after_finish)
    assert isinstance(plan, CheckpointPlan), plan
    return plan


def test_with_every_task_running_the_sources_are_triggered_and_every_task_waited_for() -> None:
    plan = plan_of(union_job())
    assert names(plan.tasks_to_trigger) == ["b0", "b1", "u0", "u1"]
    assert len(plan.tasks_to_wait_for) == 6 and not plan.finished_tasks and not plan.fully_finished_vertices


def test_a_finished_bounded_source_is_skipped_and_recorded_fully_finished() -> None:
    plan = plan_of(union_job(bounded=F))
    assert names(plan.tasks_to_trigger) == ["u0", "u1"]  # the sink still gets barriers from u
    assert names(plan.tasks_to_wait_for) == ["s0", "s1", "u0", "u1"]
    assert names(plan.finished_tasks) == ["b0", "b1"]
    assert plan.fully_finished_vertices == ("b",)


def test_the_first_running_tasks_whose_upstream_all_finished_are_triggered() -> None:
    plan = plan_of(union_job(bounded=F, unbounded=F))
    assert names(plan.tasks_to_trigger) == ["s0", "s1"]
    assert names(plan.tasks_to_wait_for) == ["s0", "s1"]
    assert set(plan.fully_finished_vertices) == {"b", "u"}


def test_one_finished_subtask_of_an_all_to_all_producer_triggers_nothing_downstream() -> None:
    tasks = [T("a", 0, F), T("a", 1, R), T("c", 0, R, (("a", 0), ("a", 1))), T("c", 1, R, (("a", 0), ("a", 1)))]
    plan = plan_of(tasks)
    assert names(plan.tasks_to_trigger) == ["a1"]
    assert names(plan.finished_tasks) == ["a0"] and plan.fully_finished_vertices == ()


def test_pointwise_consumers_of_a_finished_subtask_are_triggered_and_the_others_get_barriers() -> None:
    # a (p=2) -> forward -> c (p=2) -> forward -> d (p=2): pipeline 0 finished its source only
    tasks = [
        T("a", 0, F), T("a", 1, R),
        T("c", 0, R, (("a", 0),)), T("c", 1, R, (("a", 1),)),
        T("d", 0, R, (("c", 0),)), T("d", 1, R, (("c", 1),)),
    ]
    plan = plan_of(tasks)
    assert names(plan.tasks_to_trigger) == ["a1", "c0"]
    assert names(plan.tasks_to_wait_for) == ["a1", "c0", "c1", "d0", "d1"]


@pytest.mark.parametrize("state", [ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.CANCELING, ExecutionState.SCHEDULED])
def test_impossible_while_a_task_is_neither_running_nor_finished(state: ExecutionState) -> None:
    tasks = union_job(bounded=F)
    tasks[4] = T("s", 0, state, tasks[4].upstream)
    reason = calculate_checkpoint_plan(tasks)
    assert isinstance(reason, str) and "s[0]" in reason and state.name in reason


def test_impossible_when_every_task_finished() -> None:
    reason = calculate_checkpoint_plan(union_job(F, F, (F, F)))
    assert reason == "every task has finished"


def test_impossible_after_a_task_finished_when_the_option_is_off() -> None:
    reason = calculate_checkpoint_plan(union_job(bounded=F), checkpoints_after_tasks_finish=False)
    assert isinstance(reason, str) and "checkpoints-after-tasks-finish" in reason
    assert isinstance(calculate_checkpoint_plan(union_job(), checkpoints_after_tasks_finish=False), CheckpointPlan)


def test_the_option_is_flinks_key_on_by_default_and_reads_the_old_key() -> None:
    def cfg(conf: dict[str, str]) -> bool:
        return CheckpointCoordinatorConfiguration.from_config(conf, "job").checkpoints_after_tasks_finish

    assert cfg({}) is True
    assert cfg({"execution.checkpointing.checkpoints-after-tasks-finish": "false"}) is False
    assert cfg({"execution.checkpointing.checkpoints-after-tasks-finish.enabled": "false"}) is False
