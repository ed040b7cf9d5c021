"""The job's operator coordinators, held for the scheduler (Flink: OperatorCoordinatorHolder).

One holder per operator with a coordinator: it creates the coordinator from the provider in the
JobGraph with a context (the job, the operator, its current parallelism, a way to fail the job),
and translates the scheduler's events (checkpoint complete, restart of some subtasks, job end)
into the coordinator's hooks with that operator's committables. Every hook exists on the base
class, so nothing is probed.
"""
from __future__ import annotations

import pickle
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle

from runtime.core.operators import OperatorCoordinator
from runtime.graph.job_graph import JobGraph, JobVertex

RunIO = Callable[..., Awaitable[Any]]  # runs a blocking call off the main thread


@dataclass
class _Context:
    """OperatorCoordinatorContext for one operator."""

    job_id: str
    operator_id: str
    operator_name: str
    vertex: JobVertex
    parallelism_of: Callable[[str], int]
    fail: Callable[[BaseException, str], None]

    def current_parallelism(self) -> int:
        return self.parallelism_of(self.vertex.id)

    def fail_job(self, cause: BaseException) -> None:
        self.fail(cause, self.operator_name)


@dataclass
class OperatorCoordinatorHolder:
    node_id: int
    operator_id: str
    name: str
    vertex: JobVertex
    coordinator: OperatorCoordinator

    def committables(self, checkpoint: Any) -> list[Any]:
        """This operator's committables in a completed checkpoint (its subtasks', in subtask order)."""
        if checkpoint is None:
            return []
        return [pickle.loads(b) for b in checkpoint.committables.get(self.operator_id, [])]


class OperatorCoordinators:
    """Every coordinator of a job, by the operator's node id."""

    def __init__(self) -> None:
        self.holders: dict[int, OperatorCoordinatorHolder] = {}

    def start_all(self, job_graph: JobGraph, parallelism_of: Callable[[str], int], fail_job: Callable[[BaseException, str], None]) -> None:
        """Create and start every coordinator (this holder is shared, e.g. with the speculation
        policy, so it is filled, not replaced); an exception names its operator (`__millrace_operator__`)."""
        for jv in job_graph.vertices:
            for op in jv.operators:
                if not op.coordinator_provider:
                    continue
                try:
                    provider = cloudpickle.loads(op.coordinator_provider)
                    context = _Context(job_graph.job_id, op.operator_id, op.name, jv, parallelism_of, fail_job)
                    coordinator = provider.create(context)
                    if not isinstance(coordinator, OperatorCoordinator):
                        raise TypeError(f"{type(provider).__name__}.create returned {type(coordinator).__name__}, not an OperatorCoordinator")
                    coordinator.start()
                except Exception as e:
                    e.__millrace_operator__ = op.name  # type: ignore[attr-defined]  # the failure message names the operator
                    self.close_all(lambda *_: None)
                    self.holders.clear()
                    raise
                self.holders[op.node_id] = OperatorCoordinatorHolder(op.node_id, op.operator_id, op.name, jv, coordinator)

    def __iter__(self) -> Iterator[OperatorCoordinatorHolder]:
        return iter(list(self.holders.values()))

    def __len__(self) -> int:
        return len(self.holders)

    def get(self, node_id: int) -> OperatorCoordinator | None:
        holder = self.holders.get(node_id)
        return holder.coordinator if holder is not None else None

    def values(self) -> list[OperatorCoordinator]:
        return [h.coordinator for h in self.holders.values()]

    def of_vertex(self, vertex_id: str) -> list[OperatorCoordinatorHolder]:
        return [h for h in self.holders.values() if h.vertex.id == vertex_id]

    # --- the scheduler's events -----------------------------------------------------------------
    def execution_attempt_failed(self, vertex_id: str, subtask: int, attempt: int) -> None:
        for h in self.of_vertex(vertex_id):
            h.coordinator.execution_attempt_failed(subtask, attempt)

    async def reset_to_checkpoint(self, restarted: dict[str, set[int]], checkpoint: Any, run_io: RunIO) -> None:
        """Coordinators of restarted operators go back to `checkpoint` (None: from scratch);
        `restarted`: job vertex id -> the subtasks that restart."""
        cid = checkpoint.checkpoint_id if checkpoint is not None else None
        for h in self:
            subtasks = restarted.get(h.vertex.id)
            if subtasks:
                await run_io(h.coordinator.reset_to_checkpoint, cid, h.committables(checkpoint), subtasks)

    def final_committables(self, finished: dict[str, set[int]]) -> dict[str, dict[int, bytes]]:
        """FLIP-147: what finished subtasks hold that no checkpoint committed, by operator id (pickled)."""
        out: dict[str, dict[int, bytes]] = {}
        for h in self:
            subtasks = finished.get(h.vertex.id)
            if not subtasks:
                continue
            held = h.coordinator.final_committables(set(subtasks))
            if held:
                out[h.operator_id] = {i: cloudpickle.dumps(c) for i, c in held.items()}
        return out

    def close_all(self, on_error: Callable[[OperatorCoordinatorHolder, Exception], None]) -> None:
        for h in self:
            try:
                h.coordinator.close()
            except Exception as e:  # noqa: BLE001 - closing goes on for the other coordinators
                on_error(h, e)
