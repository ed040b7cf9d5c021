from __future__ import annotations

import pytest

from runtime.core.errors import IllegalStateTransitionError
from runtime.core.states import (
    EXECUTION_TRANSITIONS,
    JOB_TRANSITIONS,
    SLOT_TRANSITIONS,
    ExecutionState,
    JobStatus,
    SlotState,
    execution_state_machine,
    job_status_machine,
    slot_state_machine,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "factory,table,enum_",
    [
        (lambda: execution_state_machine("t"), EXECUTION_TRANSITIONS, ExecutionState),
        (lambda: job_status_machine("j"), JOB_TRANSITIONS, JobStatus),
        (lambda: slot_state_machine("s"), SLOT_TRANSITIONS, SlotState),
    ],
)
def test_every_table_entry_is_allowed_and_everything_else_raises(factory, table, enum_) -> None:
    for start, allowed in table.items():
        for target in enum_:
            sm = factory()
            sm._state = start  # put the machine in `start` to probe one move
            if target in allowed:
                assert sm.transition(target) is start
                assert sm.state is target
            else:
                with pytest.raises(IllegalStateTransitionError, match=f"{start.name} -> {target.name}"):
                    sm.transition(target)
                assert sm.state is start


def test_execution_happy_path_and_terminal_states() -> None:
    sm = execution_state_machine("Map (1/2)")
    for s in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.INITIALIZING, ExecutionState.RUNNING, ExecutionState.FINISHED):
        sm.transition(s)
    assert sm.state.is_terminal
    with pytest.raises(IllegalStateTransitionError):
        sm.transition(ExecutionState.RUNNING)


def test_job_status_paths() -> None:
    for path, end in (
        ([JobStatus.RUNNING, JobStatus.FINISHED], JobStatus.FINISHED),
        ([JobStatus.RUNNING, JobStatus.FAILING, JobStatus.FAILED], JobStatus.FAILED),
        ([JobStatus.RUNNING, JobStatus.CANCELLING, JobStatus.CANCELED], JobStatus.CANCELED),
    ):
        sm = job_status_machine("j")
        for s in path:
            sm.transition(s)
        assert sm.state is end and end.is_globally_terminal
    sm = job_status_machine("j")
    with pytest.raises(IllegalStateTransitionError):
        sm.transition(JobStatus.FINISHED)  # CREATED -> FINISHED skips RUNNING
