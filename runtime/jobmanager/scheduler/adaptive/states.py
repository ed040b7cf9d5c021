"""The adaptive scheduler's states, one class each, and the one table of moves between them
(Flink: AdaptiveScheduler's State classes).

  Created -> WaitingForResources -> CreatingExecutionGraph -> Executing -> Finished
                    ^                                           |  |  \\
                    |                                           |  |   StopWithSavepoint -> Finished
                    +------------ Restarting <------------------+  +-> Canceling | Failing -> Finished

A state names the job status it shows and says which events it takes; the AdaptiveScheduler
(`scheduler.py`) carries the work each move starts.
"""
from __future__ import annotations

from runtime.core.errors import IllegalStateTransitionError
from runtime.core.states import JobStatus


class AdaptiveState:
    name = "Created"
    job_status = JobStatus.CREATED
    takes_slots = False  # new slots may change what this state does
    has_execution = False  # an ExecutionGraph (a running execution) exists in this state

    def __repr__(self) -> str:
        return self.name


class Created(AdaptiveState):
    pass


class WaitingForResources(AdaptiveState):
    """Waiting for the minimum slots, then for them to stabilise (or the upper bound)."""

    name = "WaitingForResources"
    takes_slots = True

    def __init__(self, after_restart: bool = False) -> None:
        self.job_status = JobStatus.RESTARTING if after_restart else JobStatus.CREATED


class CreatingExecutionGraph(AdaptiveState):
    """Deciding the parallelism and restoring the newest checkpoint into a new execution."""

    name = "CreatingExecutionGraph"

    def __init__(self, job_status: JobStatus) -> None:
        self.job_status = job_status


class Executing(AdaptiveState):
    name = "Executing"
    job_status = JobStatus.RUNNING
    takes_slots = True
    has_execution = True


class Restarting(AdaptiveState):
    """The execution is being cancelled (a failure, a rescale, lost slots); then, after the back-off,
    a new one at the parallelism the slots allow."""

    name = "Restarting"
    job_status = JobStatus.RESTARTING
    has_execution = True

    def __init__(self, cause: str, backoff_s: float, rescale: bool) -> None:
        self.cause = cause
        self.backoff_s = backoff_s
        self.rescale = rescale


class StopWithSavepoint(AdaptiveState):
    name = "StopWithSavepoint"
    job_status = JobStatus.RUNNING
    has_execution = True


class Canceling(AdaptiveState):
    name = "Canceling"
    job_status = JobStatus.CANCELLING
    has_execution = True


class Failing(AdaptiveState):
    name = "Failing"
    job_status = JobStatus.FAILING
    has_execution = True


class Finished(AdaptiveState):
    name = "Finished"

    def __init__(self, job_status: JobStatus) -> None:
        self.job_status = job_status


TRANSITIONS: dict[type[AdaptiveState], frozenset[type[AdaptiveState]]] = {
    Created: frozenset({WaitingForResources, Finished}),
    WaitingForResources: frozenset({CreatingExecutionGraph, Finished}),
    CreatingExecutionGraph: frozenset({Executing, WaitingForResources, Finished}),
    Executing: frozenset({Restarting, StopWithSavepoint, Canceling, Failing, Finished}),
    Restarting: frozenset({WaitingForResources, CreatingExecutionGraph, Canceling, Finished}),
    StopWithSavepoint: frozenset({Executing, Restarting, Canceling, Finished}),
    Canceling: frozenset({Finished}),
    Failing: frozenset({Finished}),
    Finished: frozenset(),
}


def check_transition(job_id: str, current: AdaptiveState, to: AdaptiveState) -> None:
    if type(to) not in TRANSITIONS[type(current)]:
        raise IllegalStateTransitionError(f"adaptive scheduler of job {job_id}: illegal transition {current.name} -> {to.name}")
