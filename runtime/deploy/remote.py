"""Submitting to a running cluster over its REST API (Flink: RestClusterClient + RemoteExecutor).

The JobClient is the same `DispatcherJobClient` the embedded cluster uses; only the transport
differs: `_RestDispatcher` answers its Dispatcher calls with REST requests.
"""
from __future__ import annotations

from typing import Any

from runtime.api.execution import FailureListener, JobExecutionResult, StatusListener
from runtime.core.states import JobStatus
from runtime.deploy.client_logging import ensure_client_logging
from runtime.deploy.cluster_file import ClusterEndpoint
from runtime.deploy.job_client import DispatcherJobClient
from runtime.graph.job_graph import JobGraph
from runtime.rest.client import RestClusterClient
from runtime.rpc import messages as m


class _RestDispatcher:
    """The Dispatcher calls DispatcherJobClient makes, over REST."""

    def __init__(self, client: RestClusterClient) -> None:
        self.client = client

    _METHODS = frozenset({
        "request_job_result", "request_job_status", "request_job_history", "request_job_exceptions", "cancel_job", "send_coordination_request",
    })

    def call_sync(self, method: str, arg: Any = None, timeout: float | None = None) -> Any:
        if method not in self._METHODS:
            raise NotImplementedError(f"{method} is not available over REST")
        job_id = getattr(arg, "job_id", None)
        if not isinstance(job_id, str):
            raise TypeError(f"{method} over REST takes a message with a job_id, got {arg!r}")
        if method == "request_job_result":
            return self.client.job_result(job_id)
        if method == "request_job_status":
            return m.JobStatusMessage(job_id=job_id, status=JobStatus[self.client.job_details(job_id).state])
        if method == "request_job_history":
            return m.JobList(
                jobs=[
                    m.JobOverview(job_id=job_id, job_name=cause or "", status=JobStatus[status], start_time_ms=ts, duration_ms=0)
                    for status, ts, cause in self.client.job_history(job_id)
                ]
            )
        if method == "request_job_exceptions":
            exc = self.client.job_exceptions(job_id)
            return m.JobExceptionsMessage(
                job_id=job_id, num_restarts=exc.restarts, restart_strategy=exc.restart_strategy,
                entries=[
                    m.ExceptionHistoryEntryMessage(
                        timestamp_ms=e.timestamp or 0,
                        error=m.ErrorInfo(type_name=e.exception_name, message=e.message, traceback=e.stacktrace, task=e.task_name,
                                          operator=e.operator, task_manager=e.location or e.taskmanager_id),
                        concurrent=[m.ErrorInfo(type_name=c.exception_name, message=c.message) for c in e.concurrent_exceptions],
                    )
                    for e in exc.exception_history.entries
                ],
            )
        if method == "cancel_job":
            self.client.cancel_job(job_id)
            return m.Ack()
        if method == "send_coordination_request":
            payload = self.client.coordination_request(job_id, arg.node_id, arg.payload)
            return m.CoordinationResponse(payload=payload)
        raise NotImplementedError(f"{method} is not available over REST")


def rest_client(endpoint: ClusterEndpoint, timeout: float = 30.0) -> RestClusterClient:
    """A client of `endpoint`; of an HA cluster's, one that follows the leader through failovers."""
    leader = None
    if endpoint.ha is not None:
        ha = endpoint.ha

        def leader() -> str | None:
            from runtime.ha.leader import retrieve_leader

            return retrieve_leader(ha.quorum, ha.cluster_path, timeout_s=5.0, connection_timeout_ms=5_000).rest_url

    return RestClusterClient(endpoint.url, endpoint.token, timeout=timeout, leader=leader)


class RestExecutor:
    """PipelineExecutor that submits JobGraphs to a session (or per-job) cluster."""

    def __init__(self, endpoint: ClusterEndpoint, detached: bool = False) -> None:
        self.endpoint = endpoint
        self.client = rest_client(endpoint)
        self.detached = detached

    def execute(self, job_graph: JobGraph, status_listener: StatusListener | None = None, failure_listener: FailureListener | None = None) -> Any:
        ensure_client_logging(job_graph.config or {})  # the client's logs stay out of the program's handlers
        job_id = self.client.submit_job(job_graph)
        if self.detached:
            return DetachedJobClient(_RestDispatcher(self.client), job_id, job_graph.job_name)
        return DispatcherJobClient(_RestDispatcher(self.client), job_id, status_listener, failure_listener)


class DetachedJobClient(DispatcherJobClient):
    """Detached mode: execute() returns at once (Flink's DetachedJobExecutionResult); the job runs on."""

    def __init__(self, dispatcher: Any, job_id: str, job_name: str) -> None:
        super().__init__(dispatcher, job_id)
        self.job_name = job_name

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        return JobExecutionResult(self.job_id, self.job_name, JobStatus.RUNNING)
