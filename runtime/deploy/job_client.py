"""JobClient over the Dispatcher gateway (used by the embedded executor, the CLI and tests)."""
from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import cloudpickle

from runtime.api.execution import FailureListener, JobExecutionResult, JobFailure, StatusListener
from runtime.core.errors import JobExecutionError
from runtime.core.states import JobStatus
from runtime.rpc import messages as m


def job_failures(exceptions: m.JobExceptionsMessage) -> list[JobFailure]:
    """The failures of a job's exception history (newest first there), oldest first."""
    return [
        JobFailure(
            timestamp_ms=e.timestamp_ms, exception=e.error.type_name, message=e.error.message, operator=e.error.operator,
            task=e.error.task, task_manager=e.error.task_manager, concurrent=len(e.concurrent),
        )
        for e in sorted(exceptions.entries, key=lambda e: e.timestamp_ms)
    ]


class DispatcherCalls(Protocol):
    """What a job client needs of the Dispatcher: its methods called by name from a plain thread.
    A DispatcherGateway does it over RPC; runtime.deploy.remote's stand-in over the REST API."""

    def call_sync(self, method: str, arg: Any = None, timeout: float = ...) -> Any: ...


class DispatcherJobClient:
    """A job's client. With listeners, a watcher thread reports each status change and each failure
    (the exception history: a region restart changes no job status) as they happen."""

    def __init__(
        self,
        dispatcher: DispatcherCalls,
        job_id: str,
        status_listener: StatusListener | None = None,
        failure_listener: FailureListener | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self._job_id = job_id
        self._on_close = on_close
        self._closed = False
        self._result: m.JobResultMessage | None = None
        self._watcher: threading.Thread | None = None
        if status_listener is not None or failure_listener is not None:
            self._watcher = threading.Thread(
                target=self._watch, args=(status_listener, failure_listener), daemon=True, name=f"job-status-{job_id[:8]}"
            )
            self._watcher.start()

    @property
    def job_id(self) -> str:
        return self._job_id

    def _watch(self, listener: StatusListener | None, failure_listener: FailureListener | None) -> None:
        seen = 0
        reported: set[tuple[int, str, str | None]] = set()
        arg = m.JobIdMessage(job_id=self._job_id)
        while True:
            try:
                hist: m.JobList = self.dispatcher.call_sync("request_job_history", arg, timeout=10)
                failures = job_failures(self.dispatcher.call_sync("request_job_exceptions", arg, timeout=10)) if failure_listener else []
            except Exception:  # noqa: BLE001 - the cluster went away; the result call reports it
                return
            # status changes and failures in the order they happened (a failure before the RESTARTING it caused)
            events: list[tuple[int, int, Callable[[], None]]] = []
            if listener is not None:
                for entry in hist.jobs[seen:]:
                    events.append((entry.start_time_ms, 1, functools.partial(listener, self._job_id, entry.status, entry.job_name or None)))
            if failure_listener is not None:
                for failure in failures:
                    key = (failure.timestamp_ms, failure.exception, failure.task)
                    if key not in reported:
                        reported.add(key)
                        events.append((failure.timestamp_ms, 0, functools.partial(failure_listener, self._job_id, failure)))
            for _, _, report in sorted(events, key=lambda e: e[:2]):
                report()
            seen = len(hist.jobs)
            if hist.jobs and hist.jobs[-1].status.is_globally_terminal:
                return
            time.sleep(0.1)  # polling interval of the watcher thread

    def get_job_status(self) -> JobStatus:
        return self.dispatcher.call_sync("request_job_status", m.JobIdMessage(job_id=self._job_id)).status

    def wait_result_message(self, timeout: float | None = None) -> m.JobResultMessage:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._result is None:
            res: m.JobResultMessage = self.dispatcher.call_sync("request_job_result", m.JobIdMessage(job_id=self._job_id), timeout=15)
            if res.status.is_globally_terminal:
                self._result = res
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self._job_id} still {res.status.name} after {timeout}s")
        if self._watcher is not None:
            self._watcher.join(2)
        return self._result

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        res = self.wait_result_message(timeout)
        if res.status is not JobStatus.FINISHED:
            cause = res.error
            detail = cause.describe() if cause else "no cause recorded"
            msg = f"job {res.job_id} '{res.job_name}' {res.status.name}: {detail}"
            if cause is not None and cause.traceback:
                msg += "\n\nCaused by (traceback from the task):\n" + cause.traceback.rstrip()
            raise JobExecutionError(msg, job_id=res.job_id, cause=cause)
        accumulators = cloudpickle.loads(res.accumulators_pickle) if res.accumulators_pickle else {}
        metrics = {v.name: {"records_in": v.records_in, "records_out": v.records_out, "parallelism": v.parallelism} for v in res.vertices}
        return JobExecutionResult(res.job_id, res.job_name, res.status, res.duration_ms, res.running_ms, accumulators, metrics)

    def cancel(self) -> None:
        self.dispatcher.call_sync("cancel_job", m.JobIdMessage(job_id=self._job_id))

    def send_coordination_request(self, node_id: int, request: Any) -> Any:
        resp: m.CoordinationResponse = self.dispatcher.call_sync(
            "send_coordination_request",
            m.CoordinationRequest(job_id=self._job_id, node_id=node_id, payload=cloudpickle.dumps(request)),
        )
        return cloudpickle.loads(resp.payload)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._on_close is not None:
            self._on_close()
