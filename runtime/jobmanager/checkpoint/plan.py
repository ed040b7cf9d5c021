"""Which tasks a checkpoint triggers, waits for and records as finished (FLIP-147).

Port of Flink's DefaultCheckpointPlanCalculator. With every task running, the tasks of the
input vertices (the sources) are triggered and every task is waited for. Once some tasks
finished (a bounded source beside an unbounded one), checkpoints go on:

- a FINISHED task is skipped: it is neither triggered nor waited for; the checkpoint records it
  as finished, so a restore deploys it as finished instead of running it again;
- the tasks triggered are the running tasks none of whose upstream tasks still runs (the new
  "sources"): barriers cannot come to them through a finished producer, so the coordinator
  injects them there; a task with some running upstream gets the barrier in-band, and its
  channels from finished producers count as aligned;
- a vertex all of whose tasks finished is fully finished (Flink: FullyFinishedOperatorState).

Pure: the caller hands in each task's state and the tasks it reads from.
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from runtime.core.states import ExecutionState


class PlanTask(Protocol):
    """What the calculator needs to know of one subtask (its current attempt)."""

    @property
    def vertex_id(self) -> str: ...

    @property
    def subtask_index(self) -> int: ...

    @property
    def state(self) -> ExecutionState: ...

    @property
    def upstream(self) -> tuple[tuple[str, int], ...]:
        """(vertex id, subtask index) of every task whose output this one reads."""
        ...


T = TypeVar("T", bound=PlanTask)


@dataclass(frozen=True)
class CheckpointPlan(Generic[T]):
    """Flink: CheckpointPlan."""

    tasks_to_trigger: tuple[T, ...]
    tasks_to_wait_for: tuple[T, ...]
    finished_tasks: tuple[T, ...]
    fully_finished_vertices: tuple[str, ...]


def _key(task: PlanTask) -> Hashable:
    return (task.vertex_id, task.subtask_index)


def calculate_checkpoint_plan(tasks: Sequence[T], checkpoints_after_tasks_finish: bool = True) -> CheckpointPlan[T] | str:
    """The plan of a checkpoint over `tasks` (every subtask of the job), or why none can start now.

    A checkpoint is impossible while a task is neither RUNNING nor FINISHED (being deployed,
    restored, cancelled), when every task finished, and, with `checkpoints_after_tasks_finish`
    off (Flink's execution.checkpointing.checkpoints-after-tasks-finish), once any task finished.
    """
    if not tasks:
        return "the job has no tasks"
    for t in tasks:
        if t.state not in (ExecutionState.RUNNING, ExecutionState.FINISHED):
            return f"not every task is running: {t.vertex_id}[{t.subtask_index}] is {t.state.name}"
    finished = tuple(t for t in tasks if t.state is ExecutionState.FINISHED)
    running = tuple(t for t in tasks if t.state is ExecutionState.RUNNING)
    if not running:
        return "every task has finished"
    if finished and not checkpoints_after_tasks_finish:
        return "some tasks have finished (execution.checkpointing.checkpoints-after-tasks-finish is off)"
    running_keys = {_key(t) for t in running}
    # Flink: calculateAfterTasksFinished -- a running task with no running predecessor is triggered
    # (a task of an input vertex has none, so with every task running these are the sources)
    to_trigger = tuple(t for t in running if not any(u in running_keys for u in t.upstream))
    vertices: dict[str, list[bool]] = {}
    for t in tasks:
        vertices.setdefault(t.vertex_id, []).append(t.state is ExecutionState.FINISHED)
    fully_finished = tuple(v for v, done in vertices.items() if all(done))
    return CheckpointPlan(to_trigger, running, finished, fully_finished)
