"""The job's operator coordinators, held for the scheduler (Flink: OperatorCoordinatorHolder).

One holder per operator with a coordinator: it creates the coordinator from the provider in the
JobGraph with a context (the job, the operator, its current parallelism, a way to fail the job),
and translates the scheduler's events (checkpoint complete, restart of some subtasks, job end)
into the coordinator's hooks with that operator's committables. Every hook exists on the base
class, so nothing is probed.

Events from a coordinator to its subtasks go through an `EventValve` (Flink's
OperatorEventValve): in order per subtask; closed from the coordinator's checkpoint until every
task of that checkpoint was triggered, so an event sent after the coordinator's snapshot reaches
its subtask after the subtask's snapshot (a split is then in exactly one of the two).
"""
from __future__ import annotations

import asyncio
import logging
import pickle
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cloudpickle

from runtime.core.operators import OperatorCoordinator
from runtime.graph.job_graph import JobGraph, JobVertex

RunIO = Callable[..., Awaitable[Any]]  # runs a blocking call off the main thread
# delivers one event: (vertex id, subtask, attempt, node id, pickled event) -> delivered or not
DeliverEvent = Callable[[str, int, int, int, bytes], Awaitable[bool]]

log = logging.getLogger(__name__)


@dataclass
class CoordinatorServices:
    """What the scheduler lends every coordinator's context: its main loop and a way to reach a task."""

    loop: asyncio.AbstractEventLoop
    deliver: DeliverEvent


class EventValve:
    """Coordinator -> subtask events of one operator, in order per subtask; held while closed."""

    def __init__(self, services: CoordinatorServices, vertex_id: str, node_id: int) -> None:
        self.services, self.vertex_id, self.node_id = services, vertex_id, node_id
        self.closed = False
        self._held: list[tuple[int, int, bytes]] = []
        # (subtask, attempt) -> its newest send (the next waits for it; a new attempt never waits behind a dead one's)
        self._last: dict[tuple[int, int], asyncio.Future[Any]] = {}

    def send(self, subtask: int, attempt: int, payload: bytes) -> None:
        if self.closed:
            log.debug("event for %s[%d] attempt %d held", self.vertex_id, subtask, attempt)
            self._held.append((subtask, attempt, payload))
        else:
            self._dispatch(subtask, attempt, payload)

    def _dispatch(self, subtask: int, attempt: int, payload: bytes) -> None:
        key = (subtask, attempt)
        before = self._last.get(key)

        async def send() -> None:
            if before is not None:
                await asyncio.wait([before])
            try:
                if not await self.services.deliver(self.vertex_id, subtask, attempt, self.node_id, payload):
                    log.debug("event for %s[%d] attempt %d dropped: not running", self.vertex_id, subtask, attempt)
            except Exception as e:  # noqa: BLE001 - the attempt is gone; the coordinator hears of it from the scheduler
                log.debug("event for %s[%d] attempt %d not delivered: %s", self.vertex_id, subtask, attempt, e)

        future = asyncio.ensure_future(send(), loop=self.services.loop)
        self._last[key] = future
        future.add_done_callback(lambda f: self._last.pop(key, None) if self._last.get(key) is f else None)

    def close(self) -> None:
        self.closed = True

    async def drain(self) -> None:
        """Wait until every event sent so far was delivered (or dropped)."""
        pending = [f for f in self._last.values() if not f.done()]
        if pending:
            await asyncio.wait(pending)

    def open(self) -> None:
        self.closed = False
        held, self._held = self._held, []
        for subtask, attempt, payload in held:
            self._dispatch(subtask, attempt, payload)


@dataclass
class _Context:
    """OperatorCoordinatorContext for one operator."""

    job_id: str
    operator_id: str
    operator_name: str
    vertex: JobVertex
    parallelism_of: Callable[[str], int]
    fail: Callable[[BaseException, str], None]
    valve: EventValve | None = None
    services: CoordinatorServices | None = None

    def current_parallelism(self) -> int:
        return self.parallelism_of(self.vertex.id)

    def fail_job(self, cause: BaseException) -> None:
        self.fail(cause, self.operator_name)

    def send_event(self, subtask: int, attempt: int, event: Any) -> None:
        if self.valve is None:
            raise RuntimeError(f"the coordinator of '{self.operator_name}' cannot send events here (no scheduler)")
        self.valve.send(subtask, attempt, cloudpickle.dumps(event))

    def execute(self, fn: Callable[[], None]) -> None:
        if self.services is None:
            fn()
            return
        self.services.loop.call_soon_threadsafe(fn)

    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Any:
        if self.services is None:
            raise RuntimeError(f"the coordinator of '{self.operator_name}' has no timers here (no scheduler)")
        return self.services.loop.call_later(delay_s, fn)


@dataclass
class OperatorCoordinatorHolder:
    node_id: int
    operator_id: str
    name: str
    vertex: JobVertex
    coordinator: OperatorCoordinator
    valve: EventValve | None = None

    def committables(self, checkpoint: Any) -> list[Any]:
        """This operator's committables in a completed checkpoint (its subtasks', in subtask order)."""
        if checkpoint is None:
            return []
        return [pickle.loads(b) for b in checkpoint.committables.get(self.operator_id, [])]


class OperatorCoordinators:
    """Every coordinator of a job, by the operator's node id."""

    def __init__(self) -> None:
        self.holders: dict[int, OperatorCoordinatorHolder] = {}

    def start_all(
        self,
        job_graph: JobGraph,
        parallelism_of: Callable[[str], int],
        fail_job: Callable[[BaseException, str], None],
        services: CoordinatorServices | None = None,
    ) -> None:
        """Create and start every coordinator (this holder is shared, e.g. with the speculation
        policy, so it is filled, not replaced); an exception names its operator (`__millrace_operator__`)."""
        for jv in job_graph.vertices:
            for op in jv.operators:
                if not op.coordinator_provider:
                    continue
                try:
                    provider = cloudpickle.loads(op.coordinator_provider)
                    valve = EventValve(services, jv.id, op.node_id) if services is not None else None
                    context = _Context(job_graph.job_id, op.operator_id, op.name, jv, parallelism_of, fail_job, valve, services)
                    coordinator = provider.create(context)
                    if not isinstance(coordinator, OperatorCoordinator):
                        raise TypeError(f"{type(provider).__name__}.create returned {type(coordinator).__name__}, not an OperatorCoordinator")
                    coordinator.start()
                except Exception as e:
                    e.__millrace_operator__ = op.name  # type: ignore[attr-defined]  # the failure message names the operator
                    self.close_all(lambda *_: None)
                    self.holders.clear()
                    raise
                self.holders[op.node_id] = OperatorCoordinatorHolder(op.node_id, op.operator_id, op.name, jv, coordinator, valve)

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

    async def reset_to_checkpoint(
        self, restarted: dict[str, set[int]], checkpoint: Any, run_io: RunIO, parallelism_of: Callable[[str], int] | None = None
    ) -> None:
        """Coordinators of restarted operators go back to `checkpoint` (None: from scratch);
        `restarted`: job vertex id -> the subtasks that restart. All of an operator's subtasks:
        its coordinator's own state goes back too; some: only what it gave those subtasks."""
        cid = checkpoint.checkpoint_id if checkpoint is not None else None
        states = getattr(checkpoint, "coordinator_states", None) or {}
        for h in self:
            subtasks = restarted.get(h.vertex.id)
            if not subtasks:
                continue
            parallelism = parallelism_of(h.vertex.id) if parallelism_of is not None else h.vertex.parallelism
            if set(range(parallelism)) <= set(subtasks):
                h.coordinator.reset_coordinator(cid, states.get(h.operator_id))
            else:
                for subtask in sorted(subtasks):
                    h.coordinator.subtask_reset(subtask, cid)
            await run_io(h.coordinator.reset_to_checkpoint, cid, h.committables(checkpoint), subtasks)

    # --- checkpoints: the coordinators first, then the tasks (Flink: OperatorCoordinatorCheckpoints) --
    async def checkpoint_all(self, checkpoint_id: int) -> dict[str, bytes]:
        """Every coordinator's state for `checkpoint_id`; their valves close until `triggered`, and
        what they sent before is delivered first (it precedes the tasks' barrier)."""
        states: dict[str, bytes] = {}
        try:
            for h in self:
                state = h.coordinator.checkpoint_coordinator(checkpoint_id)
                if h.valve is not None:
                    h.valve.close()
                if state is not None:
                    states[h.operator_id] = state
            for h in self:
                if h.valve is not None:
                    await h.valve.drain()
        except BaseException:
            self.triggered()
            raise
        return states

    def triggered(self) -> None:
        """Every task of the checkpoint was triggered (or it failed): held events go out."""
        for h in self:
            if h.valve is not None:
                h.valve.open()

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
