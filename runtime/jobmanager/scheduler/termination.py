"""How a running job ends, as explicit states with one transition table (Flink: the
StopWithSavepointTerminationManager's states and the scheduler's "job is finishing" phase).

  RUNNING ----------------------> FINISHING          every task finished: coordinators commit
     |  ^                                             (the Delta sink), then the job is FINISHED
     v  |  (the savepoint failed:
  FINAL_SAVEPOINT   sources resume)                  every source reached the end of its input
     |                                                (execution.end-of-input.savepoint): a
     v                                                drained savepoint is being taken
  STOPPING ---------------------> (job FINISHED)      a stop-with-savepoint completed and its sinks
                                                      committed: every task is being ended

While FINISHING or STOPPING, cancels are refused and TaskManager losses and task failures no
longer matter (nothing may close a coordinator under a commit in flight).
"""
from __future__ import annotations

import enum

from runtime.core.state_machine import StateMachine


class Termination(str, enum.Enum):
    RUNNING = "RUNNING"  # not ending
    FINAL_SAVEPOINT = "FINAL_SAVEPOINT"
    STOPPING = "STOPPING"
    FINISHING = "FINISHING"


_T = Termination
TERMINATION_TRANSITIONS: dict[Termination, frozenset[Termination]] = {
    _T.RUNNING: frozenset({_T.FINAL_SAVEPOINT, _T.STOPPING, _T.FINISHING}),
    _T.FINAL_SAVEPOINT: frozenset({_T.RUNNING, _T.STOPPING, _T.FINISHING}),
    _T.STOPPING: frozenset(),
    _T.FINISHING: frozenset(),
}


def termination_machine(job_id: str) -> StateMachine[Termination]:
    return StateMachine(Termination.RUNNING, TERMINATION_TRANSITIONS, f"termination of job {job_id}")
