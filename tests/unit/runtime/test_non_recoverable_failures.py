"""Non-recoverable failures (Flink: SuppressRestartsException / ThrowableType.NonRecoverableError).

The kind is decided from the exception object where it was raised, travels in ErrorInfo to the
JobManager, and the scheduler fails the job without asking the restart strategy.
"""
from __future__ import annotations

import asyncio

import pytest

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import (
    CorruptStateError,
    IncompatibleStateError,
    MillraceError,
    NonRecoverableError,
    StorageError,
    ThrowableType,
    throwable_type_of,
)
from runtime.core.states import ExecutionState, JobStatus
from runtime.jobmanager.job_master import JobMaster
from runtime.jobmanager.scheduler.failover import is_unrecoverable_error
from runtime.rpc import messages as m
from runtime.rpc.service import RpcService

pytestmark = pytest.mark.unit

NON_RECOVERABLE = ThrowableType.NON_RECOVERABLE_ERROR
RECOVERABLE = ThrowableType.RECOVERABLE_ERROR


# --- classification (pure) -------------------------------------------------------------------------
def test_kinds_come_from_the_class() -> None:
    assert throwable_type_of(ValueError("user code")) is RECOVERABLE
    assert throwable_type_of(MillraceError("x")) is RECOVERABLE
    assert throwable_type_of(StorageError("a commit failed")) is RECOVERABLE  # I/O may work next time
    assert throwable_type_of(NonRecoverableError("x")) is NON_RECOVERABLE
    assert throwable_type_of(IncompatibleStateError("state 'count' changed type")) is NON_RECOVERABLE
    assert throwable_type_of(CorruptStateError("state file truncated")) is NON_RECOVERABLE
    assert isinstance(CorruptStateError("x"), StorageError)  # still caught where storage errors are


def test_a_non_recoverable_cause_anywhere_in_the_chain_wins() -> None:
    def wrapped(explicit: bool) -> BaseException:
        try:
            try:
                raise CorruptStateError("state file x is truncated")
            except CorruptStateError as inner:
                if explicit:
                    raise RuntimeError("open() failed") from inner
                raise RuntimeError("open() failed")  # noqa: B904  # the implicit context is the case under test
        except RuntimeError as outer:
            return outer

    assert throwable_type_of(wrapped(explicit=True)) is NON_RECOVERABLE
    assert throwable_type_of(wrapped(explicit=False)) is NON_RECOVERABLE

    try:
        try:
            raise CorruptStateError("x")
        except CorruptStateError:
            raise ValueError("handled, and replaced on purpose") from None
    except ValueError as hidden:
        assert throwable_type_of(hidden) is RECOVERABLE  # `from None` hides the context, as in a traceback


def test_a_cyclic_cause_chain_ends() -> None:
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert throwable_type_of(a) is RECOVERABLE


def test_the_kind_survives_the_trip_as_error_info() -> None:
    info = m.ErrorInfo.from_exception(IncompatibleStateError("state 'count' of operator 'counts': LONG -> STRING"), task="counts (1/2)#0")
    assert info.throwable_type is NON_RECOVERABLE and info.is_non_recoverable
    wire = m.ErrorInfo.model_validate_json(info.model_dump_json())  # what the TaskManager sends
    assert wire.throwable_type is NON_RECOVERABLE and is_unrecoverable_error(wire)
    # a failure reported without the field (older senders, JobManager-made infos) is recoverable
    plain = m.ErrorInfo(type_name="IncompatibleStateError", message="same name, but no kind")
    assert plain.throwable_type is RECOVERABLE and not is_unrecoverable_error(plain)
    assert is_unrecoverable_error(CorruptStateError("raised on the JobManager")) and not is_unrecoverable_error(ValueError())


# --- the scheduler (Flink: ExecutionFailureHandler checks unrecoverable errors first) ----------------
@pytest.fixture
def checkpointed_job_master():
    """A running job whose restart strategy would restart it (checkpointing on: exponential-delay)."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    env.enable_checkpointing(60_000)
    env.from_collection(list(range(10))).rebalance().map(lambda x: x).print()
    rpc = RpcService("secret", "jm-test", listen=False)  # never started: the test drives the JobMaster by hand
    jm = JobMaster(rpc, env.get_job_graph("non-recoverable"), on_terminal=lambda _: None)
    jm.status.transition(JobStatus.RUNNING)
    for ev in jm.eg.all_vertices():
        for state in (ExecutionState.SCHEDULED, ExecutionState.DEPLOYING, ExecutionState.RUNNING):
            ev.current_execution.transition_state(state)
    yield jm
    pending = list(jm._tasks)
    for task in pending:
        task.cancel()
    jm.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    jm.loop.close()
    rpc.loop.close()  # the service's own loop, never started


def _failed(exc: BaseException) -> m.ErrorInfo:
    return m.ErrorInfo.from_exception(exc, task="Map (1/1)#0")


def test_a_recoverable_failure_restarts(checkpointed_job_master: JobMaster) -> None:
    s = checkpointed_job_master.scheduler
    ev = next(iter(s.eg.all_vertices()))
    s.on_task_failed(ev, _failed(ValueError("record 7 is poisoned")))
    assert s.status.state in (JobStatus.RUNNING, JobStatus.RESTARTING) and s._pending_restart
    assert s.exception_history[-1].restarted_tasks > 0


def test_a_non_recoverable_failure_fails_the_job_without_asking_the_restart_strategy(checkpointed_job_master: JobMaster) -> None:
    s = checkpointed_job_master.scheduler
    asked: list[object] = []
    notify = s.restart_strategy.notify_failure

    def recording_notify(cause: object, timestamp_ms: int | None = None) -> bool:
        asked.append(cause)
        return notify(cause, timestamp_ms)

    s.restart_strategy.notify_failure = recording_notify  # type: ignore[method-assign]  # wrapped to record whether it is asked

    ev = next(iter(s.eg.all_vertices()))
    s.on_task_failed(ev, _failed(CorruptStateError("state file checkpoint_id=3/state-0-0-x.parquet is truncated")))
    assert s.status.state is JobStatus.FAILING and not s._pending_restart
    assert asked == [] and s.num_restarts == 0
    assert s.failure is not None and "state-0-0-x.parquet" in s.failure.message and "not restarted" in s.failure.message
    assert s.exception_history[-1].restarted_tasks == 0


def test_a_non_recoverable_failure_during_a_pending_restart_still_fails_the_job(checkpointed_job_master: JobMaster) -> None:
    s = checkpointed_job_master.scheduler
    first, second = sorted(s.eg.all_vertices(), key=lambda ev: ev.task_name_with_subtask)
    s.on_task_failed(first, _failed(ValueError("a recoverable one first")))
    assert s._pending_restart and second.id in s._pending_restart  # one region: both restart
    s.on_task_failed(second, _failed(IncompatibleStateError("state 'count': LONG -> STRING")))
    assert s.status.state is JobStatus.FAILING and s.num_restarts == 0
