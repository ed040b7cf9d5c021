"""What a failure means for the job (Flink: ExecutionFailureHandler and FailureHandlingResult).

The scheduler hands every failure here and acts on the result: restart these tasks after this
delay, or fail the job. The order is Flink's: a non-recoverable error (damaged state, a program
that does not fit its savepoint) fails the job before the restart strategy hears of it; then the
restart strategy decides whether another restart is allowed and after which back-off; then the
failover strategy names the tasks to restart, *given the cause* (a consumer that cannot read a
blocking partition names that partition, and the region strategy then restarts its producer too).
Pure: no I/O, the clock is injected.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runtime.core.errors import ThrowableType
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.jobmanager.scheduler.failover import FailoverStrategy, RestartBackoffTimeStrategy
from runtime.rpc import messages as m


@dataclass(frozen=True)
class FailureHandlingResult:
    """The decision for one failure (Flink: FailureHandlingResult)."""

    cause: m.ErrorInfo  # as the exception history records it (says why the job was not restarted)
    timestamp_ms: int
    can_restart: bool
    tasks_to_restart: frozenset[ExecutionVertexID]
    restart_delay_s: float
    global_failure: bool  # every task restarts (the job goes RESTARTING)

    @property
    def restarted_tasks(self) -> int:
        return len(self.tasks_to_restart) if self.can_restart else 0


def is_consequence(error: m.ErrorInfo | None) -> bool:
    """A failure that only echoes another one (a failed producer, a released partition, a cancelled
    task): the exception history prefers the root cause it echoes."""
    return error is not None and error.consequence


class ExecutionFailureHandler:
    """Turns a failure into a FailureHandlingResult (Flink: ExecutionFailureHandler)."""

    def __init__(
        self,
        execution_graph: ExecutionGraph,
        failover_strategy: FailoverStrategy,
        restart_strategy: RestartBackoffTimeStrategy,
        clock: Callable[[], float],
        restarts_so_far: Callable[[], int] = lambda: 0,
        say_exhausted: bool = True,
    ) -> None:
        self.eg = execution_graph
        self.failover_strategy = failover_strategy
        self.restart_strategy = restart_strategy
        self.clock = clock
        self._restarts_so_far = restarts_so_far
        # a job without checkpoints and with restart strategy 'none' fails with its cause as is
        self._say_exhausted = say_exhausted

    def get_failure_handling_result(self, failed: Sequence[ExecutionVertexID], cause: m.ErrorInfo) -> FailureHandlingResult:
        """Tasks failed with `cause` (several at once when a TaskManager is lost)."""
        return self._handle(failed, cause, global_failure=False)

    def get_global_failure_handling_result(self, cause: m.ErrorInfo) -> FailureHandlingResult:
        """The job as a whole failed (a coordinator's commit, too many failed checkpoints): every task restarts."""
        return self._handle([], cause, global_failure=True)

    def _handle(self, failed: Sequence[ExecutionVertexID], cause: m.ErrorInfo, global_failure: bool) -> FailureHandlingResult:
        now_ms = int(self.clock() * 1000)
        if cause.throwable_type is ThrowableType.NON_RECOVERABLE_ERROR:
            # checked first: the restart strategy never hears of it (a restart would read the same
            # damaged or incompatible state again)
            cause = cause.model_copy(update={"message": f"{cause.message} (a non-recoverable error: the job is not restarted)"})
            return FailureHandlingResult(cause, now_ms, False, frozenset(), 0.0, global_failure)
        self.restart_strategy.notify_failure(cause, now_ms)
        if not self.restart_strategy.can_restart():
            if self._restarts_so_far() or self._say_exhausted:
                cause = cause.model_copy(update={
                    "message": f"{cause.message} (restart strategy {self.restart_strategy.describe()} exhausted "
                    f"after {self._restarts_so_far()} restarts)"
                })
            return FailureHandlingResult(cause, now_ms, False, frozenset(), 0.0, global_failure)
        every = {ev.id for ev in self.eg.all_vertices()}
        tasks: set[ExecutionVertexID] = set(every) if global_failure else set()
        for vid in failed:
            tasks |= self.failover_strategy.get_tasks_to_restart(self.eg, vid, cause)
        return FailureHandlingResult(
            cause, now_ms, True, frozenset(tasks), self.restart_strategy.backoff_time_ms() / 1000.0, tasks == every
        )
