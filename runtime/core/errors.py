"""One exception hierarchy for the whole runtime, rooted at MillraceError.

Messages name the job, vertex or subtask, what was wrong and what to do.
"""
from __future__ import annotations

import enum
from typing import Any, ClassVar


class ThrowableType(str, enum.Enum):
    """How the scheduler treats a failure (Flink: org.apache.flink.runtime.throwable.ThrowableType).

    The kind travels with a task's failure to the JobManager (`ErrorInfo.throwable_type`), so the
    failure handler decides on the kind, never on an exception's type name.
    """

    # restarting cannot help (damaged state, a program that does not fit its savepoint): the job
    # fails at once, whatever the restart strategy says (Flink: SuppressRestartsException)
    NON_RECOVERABLE_ERROR = "NonRecoverableError"
    # an input partition is gone: its producer must run again (Flink: PartitionNotFoundException)
    PARTITION_DATA_MISSING_ERROR = "PartitionDataMissingError"
    # the machine, not the job (lost TaskManager, out of memory): restarts elsewhere may help
    ENVIRONMENT_ERROR = "EnvironmentError"
    # everything else: the restart strategy decides
    RECOVERABLE_ERROR = "RecoverableError"


class MillraceError(Exception):
    """Root of every error Millrace raises on purpose."""

    # Flink's @ThrowableAnnotation: a class says how the scheduler treats it (see throwable_type_of)
    throwable_type: ClassVar[ThrowableType] = ThrowableType.RECOVERABLE_ERROR
    # True for failures that only echo another one (a failed producer, a lost TaskManager's tasks):
    # the scheduler's exception history keeps the root cause they echo (ErrorInfo.consequence)
    consequence: ClassVar[bool] = False


class NonRecoverableError(MillraceError):
    """A failure that no restart can cure: the job fails without consulting the restart strategy
    (Flink: SuppressRestartsException). Subclass it, or set `throwable_type`, to mark an error so."""

    throwable_type = ThrowableType.NON_RECOVERABLE_ERROR


def throwable_type_of(exc: BaseException | None) -> ThrowableType:
    """The kind of `exc`: the first non-recoverable error in its chain of causes wins, else the
    kind of `exc` itself (Flink: ThrowableClassifier + ExecutionFailureHandler.isUnrecoverableError,
    which also look through the causes: user code that wraps a damaged-state error stays fatal)."""
    seen: set[int] = set()
    cur = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if getattr(cur, "throwable_type", None) is ThrowableType.NON_RECOVERABLE_ERROR:
            return ThrowableType.NON_RECOVERABLE_ERROR
        # explicit cause first; the implicit context unless `raise ... from None` hid it (as tracebacks do)
        cur = cur.__cause__ if cur.__cause__ is not None else (None if cur.__suppress_context__ else cur.__context__)
    own = getattr(exc, "throwable_type", None)
    return own if isinstance(own, ThrowableType) else ThrowableType.RECOVERABLE_ERROR


class InvalidProgramError(MillraceError):
    """The dataflow program is not a valid job (raised at compile time)."""


class IllegalStateTransitionError(MillraceError):
    """A state machine was asked for a move its transition table forbids."""


class ConfigurationError(MillraceError):
    """A configuration value is missing or malformed."""


class JobExecutionError(MillraceError):
    """A job ended FAILED or CANCELED; carries the job id and the root cause."""

    def __init__(self, message: str, job_id: str | None = None, cause: Any = None):
        # cause: the failing task's runtime.rpc.messages.ErrorInfo (type, message, traceback, where)
        super().__init__(message)
        self.job_id = job_id
        self.cause_info = cause


class UnknownJobError(MillraceError, KeyError):
    """No job with that id is known to the Dispatcher (never submitted, or evicted after it ended)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NoResourceAvailableError(MillraceError):
    """A job could not get the slots it needs in time."""


class AuthenticationError(MillraceError):
    """A peer failed the cluster-secret handshake."""


class RpcError(MillraceError):
    """A remote call failed: connection lost, timeout, or the remote raised."""


class FencingTokenError(RpcError):
    """A call carried a stale fencing token (leader session id)."""


class TaskManagerLostError(MillraceError):
    """A TaskManager died or stopped heartbeating."""

    consequence = True


class UserCodeError(MillraceError):
    """User code raised inside a task; carries the original type, message and traceback."""

    def __init__(self, message: str, type_name: str, traceback_text: str):
        super().__init__(message)
        self.type_name = type_name
        self.traceback_text = traceback_text


class StorageError(MillraceError):
    """A Delta table operation failed; nothing was committed."""


class SharedStateMissingError(StorageError):
    """A checkpoint builds on files of an earlier checkpoint that retention already removed."""


class CorruptStateError(StorageError):
    """A savepoint or checkpoint cannot be read: a state file is missing, truncated or not one of
    ours, or the path is not a savepoint at all. Restarting would read the same bytes again."""

    throwable_type = ThrowableType.NON_RECOVERABLE_ERROR


class IncompatibleStateError(NonRecoverableError):
    """Restored state does not fit the program: a state's type changed incompatibly, or the key
    type did (Flink: StateMigrationException). Restarting would restore the same state again."""


class TableInUseError(StorageError):
    """A Delta table is held by another running job's sink (its table lease): the job writing it
    second fails at start. Restarting cannot help while the other job runs."""

    throwable_type = ThrowableType.NON_RECOVERABLE_ERROR


class TableLeaseLostError(TableInUseError):
    """A running sink lost its table lease (not renewed in time, then taken over by another job):
    it commits nothing more, since another job may have written the table since."""


class CheckpointError(MillraceError):
    """A checkpoint or savepoint could not be taken (not every task runs, declined, expired, not committed)."""


class StopWithSavepointStoppingError(CheckpointError):
    """A stop-with-savepoint took its savepoint, but the job did not stop (a sink's commit of it
    failed and the job fails over, or it was cancelled meanwhile): the savepoint exists, the job
    does not end with it (Flink: StopWithSavepointStoppingException)."""


class JobNotRunningError(MillraceError):
    """The job exists but is not in a state that allows the request (e.g. a savepoint of an ended job)."""


class UnknownTriggerError(MillraceError, KeyError):
    """No savepoint trigger with that id is known for the job."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class NotLeaderError(MillraceError):
    """This JobManager is a standby (high availability): the request belongs to the leader, whose
    REST URL (when one is elected) the message and `leader_url` give."""

    def __init__(self, message: str, leader_url: str | None = None) -> None:
        super().__init__(message)
        self.leader_url = leader_url


class LeadershipLostError(MillraceError):
    """A commit was refused because this JobManager no longer leads (the fence before each commit)."""


class HaStoreError(StorageError):
    """A JobManager high-availability store (submitted job graphs, job results; Delta tables under
    `high-availability.storageDir`) cannot be read or written: its table is unreadable or not one
    of ours, or a commit failed or kept conflicting with other JobManagers' commits."""


class HaEntryNotFoundError(HaStoreError, KeyError):
    """An HA store has no entry for that job id (never stored, or removed meanwhile)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class CorruptHaEntryError(HaStoreError):
    """An HA store entry exists but its data is damaged: a submitted job graph's file is missing,
    truncated or not the bytes that were stored. Reading it again reads the same bytes."""

    throwable_type = ThrowableType.NON_RECOVERABLE_ERROR
