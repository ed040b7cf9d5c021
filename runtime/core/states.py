"""The runtime's state machines: enums plus one explicit transition table each."""
from __future__ import annotations

import enum

from runtime.core.state_machine import StateMachine


class ExecutionState(str, enum.Enum):
    """Flink's ExecutionState for one attempt of one subtask."""

    CREATED = "CREATED"
    SCHEDULED = "SCHEDULED"
    DEPLOYING = "DEPLOYING"
    INITIALIZING = "INITIALIZING"
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELING = "CANCELING"
    CANCELED = "CANCELED"
    FAILED = "FAILED"

    @property
    def is_terminal(self) -> bool:
        return self in (ExecutionState.FINISHED, ExecutionState.CANCELED, ExecutionState.FAILED)


_E = ExecutionState
EXECUTION_TRANSITIONS: dict[ExecutionState, frozenset[ExecutionState]] = {
    _E.CREATED: frozenset({_E.SCHEDULED, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.SCHEDULED: frozenset({_E.DEPLOYING, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.DEPLOYING: frozenset({_E.INITIALIZING, _E.RUNNING, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.INITIALIZING: frozenset({_E.RUNNING, _E.FINISHED, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.RUNNING: frozenset({_E.FINISHED, _E.CANCELING, _E.CANCELED, _E.FAILED}),
    _E.CANCELING: frozenset({_E.CANCELED, _E.FAILED, _E.FINISHED}),
    _E.FINISHED: frozenset(),
    _E.CANCELED: frozenset(),
    _E.FAILED: frozenset(),
}


def execution_state_machine(what: str) -> StateMachine[ExecutionState]:
    return StateMachine(ExecutionState.CREATED, EXECUTION_TRANSITIONS, what)


class JobStatus(str, enum.Enum):
    """Flink's JobStatus. SUSPENDED: the JobManager lost its leadership (high availability); the job
    is not over, the new leader runs it on (Flink: terminal, not globally terminal)."""

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"

    @property
    def is_globally_terminal(self) -> bool:
        return self in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED)

    @property
    def is_terminal(self) -> bool:
        """This JobManager is done with the job: it ended, or (SUSPENDED) another one took it over."""
        return self.is_globally_terminal or self is JobStatus.SUSPENDED


_J = JobStatus
_SUSPEND = {_J.SUSPENDED}  # leadership can be lost in every state that is not terminal
JOB_TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    _J.INITIALIZING: frozenset({_J.CREATED, _J.FAILED, _J.CANCELED, *_SUSPEND}),
    _J.CREATED: frozenset({_J.RUNNING, _J.FAILING, _J.FAILED, _J.CANCELLING, _J.CANCELED, *_SUSPEND}),
    _J.RUNNING: frozenset({_J.FINISHED, _J.FAILING, _J.CANCELLING, _J.RESTARTING, *_SUSPEND}),
    _J.FAILING: frozenset({_J.FAILED, _J.RESTARTING, _J.CANCELLING, *_SUSPEND}),
    _J.RESTARTING: frozenset({_J.RUNNING, _J.CREATED, _J.FAILING, _J.FAILED, _J.CANCELLING, _J.CANCELED, *_SUSPEND}),
    _J.CANCELLING: frozenset({_J.CANCELED, _J.FAILED, *_SUSPEND}),
    _J.FINISHED: frozenset(),
    _J.FAILED: frozenset(),
    _J.CANCELED: frozenset(),
    _J.SUSPENDED: frozenset(),
}


def job_status_machine(job_id: str) -> StateMachine[JobStatus]:
    return StateMachine(JobStatus.CREATED, JOB_TRANSITIONS, f"job {job_id}")


class SlotState(str, enum.Enum):
    """TaskSlotTable slot states (Flink's TaskSlotState plus FREE)."""

    FREE = "FREE"
    ALLOCATED = "ALLOCATED"
    ACTIVE = "ACTIVE"
    RELEASING = "RELEASING"


_S = SlotState
SLOT_TRANSITIONS: dict[SlotState, frozenset[SlotState]] = {
    _S.FREE: frozenset({_S.ALLOCATED}),
    _S.ALLOCATED: frozenset({_S.ACTIVE, _S.RELEASING, _S.FREE}),
    _S.ACTIVE: frozenset({_S.ALLOCATED, _S.RELEASING}),
    _S.RELEASING: frozenset({_S.FREE}),
}


def slot_state_machine(what: str) -> StateMachine[SlotState]:
    return StateMachine(SlotState.FREE, SLOT_TRANSITIONS, what)


def aggregate_vertex_state(states: list[ExecutionState]) -> ExecutionState:
    """A vertex's state from its subtasks' (Flink: ExecutionJobVertex.getAggregateJobVertexState)."""
    if not states:
        return ExecutionState.CREATED
    present = set(states)
    for st in (ExecutionState.FAILED, ExecutionState.CANCELING, ExecutionState.CANCELED, ExecutionState.INITIALIZING, ExecutionState.RUNNING):
        if st in present:
            return st
    if present == {ExecutionState.FINISHED}:
        return ExecutionState.FINISHED
    if ExecutionState.FINISHED in present:
        return ExecutionState.RUNNING  # some finished, others not started yet: the vertex still runs
    for st in (ExecutionState.DEPLOYING, ExecutionState.SCHEDULED):
        if st in present:
            return st
    return ExecutionState.CREATED
