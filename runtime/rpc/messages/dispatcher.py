"""Messages of the DispatcherGateway (client, REST API and CLI to the Dispatcher): submission, status,
results, job lists and the cluster overview (Flink: DispatcherGateway). Savepoint triggers are in
runtime.rpc.messages.checkpoint; job details and exceptions in runtime.rpc.messages.job_master."""
from __future__ import annotations

from pydantic import Field

from runtime.core.states import ExecutionState, JobStatus
from runtime.rpc.messages.common import ErrorInfo, Message


class SubmitJob(Message):
    job_graph_json: str


class JobIdMessage(Message):
    job_id: str


class JobStatusMessage(Message):
    job_id: str
    status: JobStatus


class VertexMetrics(Message):
    vertex_id: str
    name: str
    parallelism: int
    records_in: int = 0
    records_out: int = 0
    subtask_states: list[ExecutionState] = Field(default_factory=list)


class JobResultMessage(Message):
    job_id: str
    job_name: str
    status: JobStatus
    duration_ms: int
    running_ms: int | None = None  # from the first task RUNNING to the end (excludes slot/TaskManager wait)
    error: ErrorInfo | None = None
    accumulators_pickle: bytes | None = None  # cloudpickle of dict[str, Any] from coordinators
    vertices: list[VertexMetrics] = Field(default_factory=list)


class JobOverview(Message):
    job_id: str
    job_name: str
    status: JobStatus
    start_time_ms: int
    duration_ms: int


class JobList(Message):
    jobs: list[JobOverview]


class JobPlanMessage(Message):
    """A job's plan (runtime.graph.plan.plan_summary as JSON) and its picture (SVG, with a line per
    vertex for live figures)."""

    job_id: str
    summary_json: str
    svg: str


class ClusterOverviewMessage(Message):
    """Job counts by status (the REST API adds TaskManagers and slots from the ResourceManager)."""

    jobs_running: int = 0  # every job not yet ended (Flink counts created/restarting ones as running too)
    jobs_finished: int = 0
    jobs_cancelled: int = 0
    jobs_failed: int = 0
