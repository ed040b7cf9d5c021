"""One exception hierarchy for the whole runtime, rooted at MillraceError.

Messages name the job, vertex or subtask, what was wrong and what to do.
"""
from __future__ import annotations

from typing import Any


class MillraceError(Exception):
    """Root of every error Millrace raises on purpose."""


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



class CheckpointError(MillraceError):
    """A checkpoint or savepoint could not be taken (not every task runs, declined, expired, not committed)."""


class JobNotRunningError(MillraceError):
    """The job exists but is not in a state that allows the request (e.g. a savepoint of an ended job)."""


class UnknownTriggerError(MillraceError, KeyError):
    """No savepoint trigger with that id is known for the job."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
