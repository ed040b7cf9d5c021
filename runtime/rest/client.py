"""RestClusterClient: the REST API from Python (Flink: RestClusterClient). Synchronous, stdlib only.

Every call has a timeout; every failure is a RestError carrying the HTTP status (0 when the
cluster could not be reached) and the server's message.
"""
from __future__ import annotations

import base64
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from runtime.core.errors import MillraceError
from runtime.graph.job_graph import JobGraph
from runtime.rest import models as rm
from runtime.rpc.messages import JobResultMessage

log = logging.getLogger(__name__)

# the server long-polls a result up to ~5 s; the request must outlive that
_RESULT_POLL_S = 20.0


class RestError(MillraceError):
    """A REST call failed: `status` is the HTTP status (0: the cluster was not reachable)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


class RestClusterClient:
    def __init__(
        self, url: str, token: str, timeout: float = 30.0, leader: Callable[[], str | None] | None = None, failover_timeout_s: float = 60.0,
    ) -> None:
        """`leader`: where the current leader's REST API is (high availability: read from ZooKeeper).
        With it, a request that finds no JobManager (a killed leader) or a standby is sent again to
        the leader of the moment, for up to `failover_timeout_s` (Flink's RestClusterClient follows
        its LeaderRetrievalService the same way)."""
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.leader = leader
        self.failover_timeout_s = failover_timeout_s

    # --- transport ------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: bytes | None = None, timeout: float | None = None, text: bool = False) -> Any:
        if self.leader is None:
            return self._request_once(method, path, body, timeout, text)
        deadline = time.monotonic() + self.failover_timeout_s
        while True:
            try:
                return self._request_once(method, path, body, timeout, text)
            except RestError as e:
                # no JobManager at this URL, or a standby (503 naming the leader): follow the leader
                if e.status not in (0, 503) or time.monotonic() > deadline:
                    raise
                try:
                    url = self.leader()
                except Exception as lookup:  # noqa: BLE001 - ZooKeeper briefly unreachable: try again
                    log.debug("leader lookup failed: %s", lookup)
                    url = None
                if url and url.rstrip("/") != self.url:
                    log.info("following the cluster's leader: %s -> %s", self.url, url)
                    self.url = url.rstrip("/")
                    continue
                time.sleep(0.5)

    def _request_once(self, method: str, path: str, body: bytes | None = None, timeout: float | None = None, text: bool = False) -> Any:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "text/plain" if text else "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise RestError(self._message_of(e), status=e.code) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            reason = getattr(e, "reason", e)
            raise RestError(f"cannot reach the cluster at {self.url} ({method} {path}): {reason}; is it running?", status=0) from None
        if text:
            return raw.decode("utf-8", errors="replace")
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise RestError(f"{method} {path}: the cluster at {self.url} answered with something that is not JSON", status=0) from None

    @staticmethod
    def _message_of(e: urllib.error.HTTPError) -> str:
        try:
            body = json.loads(e.read() or b"{}")
            errors = body.get("errors") if isinstance(body, dict) else None
            if errors:
                return "; ".join(str(x) for x in errors)
        except (ValueError, OSError):
            pass
        return f"HTTP {e.code}: {e.reason}"

    # --- cluster --------------------------------------------------------------------------------
    def overview(self) -> rm.Overview:
        return rm.Overview.model_validate(self._request("GET", "/overview"))

    def cluster_info(self) -> rm.ClusterInfo:
        return rm.ClusterInfo.model_validate(self._request("GET", "/cluster"))

    def shutdown_cluster(self) -> None:
        self._request("DELETE", "/cluster")

    def task_managers(self) -> list[rm.TaskManagerDetails]:
        return rm.TaskManagersList.model_validate(self._request("GET", "/taskmanagers")).taskmanagers

    def task_manager(self, tm_id: str) -> rm.TaskManagerDetails:
        return rm.TaskManagerDetails.model_validate(self._request("GET", f"/taskmanagers/{_quote(tm_id)}"))

    def task_manager_stdout(self, tm_id: str) -> str:
        """What the TaskManager's tasks printed (its newest 1 MiB)."""
        return self._request("GET", f"/taskmanagers/{_quote(tm_id)}/stdout", text=True)

    # --- jobs -----------------------------------------------------------------------------------
    def submit_job(self, job_graph: JobGraph) -> str:
        body = job_graph.model_dump_json().encode()
        resp = self._request("POST", "/jobs", body, timeout=max(self.timeout, 60.0))
        return rm.JobSubmitResponse.model_validate(resp).jobid

    def list_jobs(self) -> list[rm.JobOverview]:
        return rm.MultipleJobsDetails.model_validate(self._request("GET", "/jobs/overview")).jobs

    def job_details(self, job_id: str) -> rm.JobDetails:
        return rm.JobDetails.model_validate(self._request("GET", f"/jobs/{_quote(job_id)}"))

    def job_exceptions(self, job_id: str) -> rm.JobExceptions:
        """Root cause, exception history (newest first), number of restarts and the restart strategy."""
        return rm.JobExceptions.model_validate(self._request("GET", f"/jobs/{_quote(job_id)}/exceptions"))

    def job_checkpoints(self, job_id: str) -> rm.CheckpointingStatistics:
        """Checkpoint counts, latest completed/failed/restored, history (newest first) and the job's settings."""
        return rm.CheckpointingStatistics.model_validate(self._request("GET", f"/jobs/{_quote(job_id)}/checkpoints"))

    def job_result(self, job_id: str) -> JobResultMessage:
        """Waits up to ~5 s server-side; a non-terminal status means: ask again."""
        data = self._request("GET", f"/jobs/{_quote(job_id)}/execution-result", timeout=max(self.timeout, _RESULT_POLL_S))
        return JobResultMessage.model_validate_json(json.dumps(data))

    def cancel_job(self, job_id: str) -> None:
        self._request("PATCH", f"/jobs/{_quote(job_id)}?mode=cancel")

    def resource_requirements(self, job_id: str) -> dict[str, tuple[int, int]]:
        """Each vertex id's (lower, upper) parallelism bound."""
        body = self._request("GET", f"/jobs/{_quote(job_id)}/resource-requirements")
        return {v: (r["parallelism"]["lowerBound"], r["parallelism"]["upperBound"]) for v, r in body.items()}

    def update_resource_requirements(self, job_id: str, bounds: dict[str, tuple[int, int]]) -> None:
        """New (lower, upper) parallelism bounds per vertex id: an adaptive job rescales."""
        payload = {v: {"parallelism": {"lowerBound": lo, "upperBound": hi}} for v, (lo, hi) in bounds.items()}
        self._request("PUT", f"/jobs/{_quote(job_id)}/resource-requirements", json.dumps(payload).encode())

    def scale_task_managers(self, count: int) -> str:
        """Run `count` TaskManagers from now on (reactive jobs follow)."""
        body = rm.TaskManagerCountRequest(taskmanagers=count).model_dump_json(by_alias=True).encode()
        return str(self._request("PUT", "/cluster/taskmanagers", body).get("message", ""))

    def trigger_savepoint(self, job_id: str, target_directory: str | None = None) -> str:
        body = rm.SavepointTriggerRequest(target_directory=target_directory).model_dump_json(by_alias=True).encode()
        return rm.TriggerResponse.model_validate(self._request("POST", f"/jobs/{_quote(job_id)}/savepoints", body)).request_id

    def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, drain: bool = False) -> str:
        body = rm.StopWithSavepointRequest(target_directory=target_directory, drain=drain).model_dump_json(by_alias=True).encode()
        return rm.TriggerResponse.model_validate(self._request("POST", f"/jobs/{_quote(job_id)}/stop", body)).request_id

    def savepoint_status(self, job_id: str, trigger_id: str) -> rm.SavepointStatusResponse:
        return rm.SavepointStatusResponse.model_validate(self._request("GET", f"/jobs/{_quote(job_id)}/savepoints/{_quote(trigger_id)}"))

    def wait_for_savepoint(self, job_id: str, trigger_id: str, timeout: float = 3600.0) -> str:
        """The savepoint's location once it completed; raises RestError with the cause if it failed."""
        deadline = time.monotonic() + timeout
        while True:
            st = self.savepoint_status(job_id, trigger_id)
            if st.status.id == "COMPLETED":
                op = st.operation
                if op is None or op.failure_cause is not None or not op.location:
                    cause = "; ".join(op.failure_cause.errors) if op is not None and op.failure_cause is not None else "no location reported"
                    raise RestError(f"savepoint of job {job_id} failed: {cause}", status=0)
                return op.location
            if time.monotonic() > deadline:
                raise RestError(f"savepoint of job {job_id} still in progress after {timeout:.0f}s (trigger {trigger_id})", status=0)
            time.sleep(0.2)

    def job_history(self, job_id: str) -> list[tuple[str, int, str | None]]:
        hist = rm.JobHistory.model_validate(self._request("GET", f"/jobs/{_quote(job_id)}/history"))
        return [(str(h.status), h.timestamp, h.cause) for h in hist.history]

    def coordination_request(self, job_id: str, node_id: int, payload: bytes) -> bytes:
        body = json.dumps({"payload": base64.b64encode(payload).decode()}).encode()
        resp = self._request("POST", f"/jobs/{_quote(job_id)}/coordinators/{int(node_id)}", body)
        return base64.b64decode(rm.CoordinationPayload.model_validate(resp).payload)
