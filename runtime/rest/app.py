"""The Dispatcher's REST API (Flink: WebMonitorEndpoint with its REST handlers), as a FastAPI app.

Shapes follow Flink's REST API where Flink has the same resource. Every request but the liveness
probe and the OpenAPI document needs the cluster token (`Authorization: Bearer <token>`). Errors
are Flink's `{"errors": [message]}`: bad input is a 4xx that says what is wrong; a 500 says only
that something broke (the traceback goes to the server log, never to the client).
"""
from __future__ import annotations

import base64
import binascii
import hmac
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import pydantic
from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from runtime.core.errors import CheckpointError, JobNotRunningError, MillraceError, NotLeaderError, RpcError, UnknownJobError, UnknownTriggerError
from runtime.graph.job_graph import JobGraph
from runtime.graph.validation import validate_job_graph
from runtime.rest import dashboard, metrics
from runtime.rest import models as rm
from runtime.rest.limits import DEFAULT_MAX_CONTENT_LENGTH, RequestLimitsMiddleware
from runtime.rpc import messages as m
from runtime.rpc.gateways import DispatcherGateway, ResourceManagerGateway
from runtime.version import __version__

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 15.0  # an endpoint that does not answer in this time makes the request a 503
SUBMIT_TIMEOUT_S = 60.0  # submission starts the JobMaster, which talks to the ResourceManager
RESULT_TIMEOUT_S = 20.0  # the Dispatcher long-polls a result up to ~5 s
MAX_JOB_GRAPH_BYTES = 512 * 1024 * 1024  # the RPC frame limit


class ClusterHooks(Protocol):
    """What the cluster entrypoint gives the REST API."""

    def info(self) -> rm.ClusterInfo: ...

    def shutdown(self) -> None:
        """Non-blocking: asks the cluster process to stop."""
        ...


class ApiError(Exception):
    """An error with its HTTP status and a message for the client."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


class Accepted(rm.RestModel):
    message: str


def _error(status: int, *messages: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"errors": list(messages)}, headers=headers)


def _describe_validation(errors: Sequence[Mapping[str, Any]], what: str) -> str:
    """A readable one-liner from pydantic/FastAPI errors (locations and reasons, never the input echoed)."""
    parts = []
    for err in errors[:3]:
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
        parts.append(f"{loc}: {err.get('msg', 'invalid')}" if loc else str(err.get("msg", "invalid")))
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return f"{what}: " + "; ".join(parts) + more


def _remote_status(message: str) -> int:
    """Errors raised in another process arrive as RpcError('<Type>: <message>'): keep their meaning."""
    if message.startswith(("UnknownJobError", "UnknownTriggerError")):
        return 404
    if message.startswith(("JobNotRunningError", "CheckpointError")):
        return 409
    if message.startswith(("JobSubmissionError", "ValueError", "JobGraphValidationError")):
        return 400
    return 503


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.message, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(400, _describe_validation(exc.errors(), "invalid request"))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such resource: {request.method} {request.url.path} (see /openapi.json)"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path} (see /openapi.json)"
        return _error(exc.status_code, message, headers=getattr(exc, "headers", None))

    def with_status(status: int) -> Any:
        async def handler(request: Request, exc: Exception) -> JSONResponse:
            return _error(status, str(exc))

        return handler

    # errors whose class says the status; Starlette picks the handler by the exception's MRO, so
    # RpcError (a MillraceError) keeps its own below, and MillraceError/ValueError are the 400 fallback
    for exc_type, status in (
        (UnknownJobError, 404), (UnknownTriggerError, 404), (JobNotRunningError, 409), (CheckpointError, 409), (NotLeaderError, 503),
        (MillraceError, 400), (ValueError, 400),
    ):
        app.add_exception_handler(exc_type, with_status(status))

    @app.exception_handler(RpcError)
    async def _rpc(request: Request, exc: RpcError) -> JSONResponse:
        status = _remote_status(str(exc))
        if status == 503:
            log.warning("[REST] %s %s: the JobManager did not answer: %s", request.method, request.url.path, exc)
            return _error(503, f"the JobManager did not answer in time; try again ({exc})")
        return _error(status, str(exc).split(": ", 1)[-1])

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.error("[REST] %s %s failed", request.method, request.url.path, exc_info=exc)
        return _error(500, "internal server error; the JobManager log has the details")


_JOB_ID = Path(description="the job id", min_length=1, max_length=1024)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _job_graph_openapi() -> tuple[dict[str, Any], dict[str, Any]]:
    """The JobGraph's JSON schema for the request body, and the component schemas it refers to."""
    schema = JobGraph.model_json_schema(ref_template="#/components/schemas/{model}")
    defs = schema.pop("$defs", {})
    defs["JobGraph"] = schema
    body = {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JobGraph"}}}}
    return body, defs


def create_app(dispatcher: DispatcherGateway, resource_manager: ResourceManagerGateway, token: str, hooks: ClusterHooks,
               max_content_length: int = DEFAULT_MAX_CONTENT_LENGTH) -> FastAPI:
    """The REST API over a Dispatcher and ResourceManager gateway, guarded by `token`; request bodies
    above `max_content_length` bytes are refused while they stream in (rest.server.max-content-length)."""
    if not token:
        raise ValueError("the REST API needs a non-empty cluster token")
    expected = token.encode()
    app = FastAPI(
        title="Millrace REST API",
        version=__version__,
        description="The Dispatcher's REST API (Flink's shapes where Flink has the same resource). "
        "Every request needs `Authorization: Bearer <cluster token>`; errors are `{\"errors\": [message]}`.",
        redoc_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(RequestLimitsMiddleware, max_content_length=max_content_length)
    bearer = HTTPBearer(auto_error=False, scheme_name="ClusterToken", description="the cluster token (cluster.json)")

    def token_ok(value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode("utf-8", "surrogateescape"), expected)

    async def require_token(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        # the dashboard's calls carry the token in the cookie its login page set
        if not token_ok(credentials.credentials if credentials is not None else request.cookies.get(dashboard.COOKIE)):
            raise ApiError(
                401,
                "missing or wrong cluster token: send 'Authorization: Bearer <token>' with the token from the cluster's cluster.json",
                headers={"WWW-Authenticate": "Bearer"},
            )

    # FastAPI's `responses`: status code -> OpenAPI response fields
    errors: dict[int | str, dict[str, Any]] = {
        400: {"model": rm.ErrorResponse, "description": "bad input; the message says what is wrong"},
        401: {"model": rm.ErrorResponse, "description": "missing or wrong cluster token"},
        503: {"model": rm.ErrorResponse, "description": "the JobManager did not answer in time"},
    }
    not_found: dict[int | str, dict[str, Any]] = {404: {"model": rm.ErrorResponse, "description": "unknown job"}}
    api = APIRouter(dependencies=[Depends(require_token)], responses=errors)

    # --- liveness (no token) ---------------------------------------------------------------
    @app.get("/healthz", tags=["cluster"], summary="Liveness probe (no token needed)")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    # --- the dashboard (runtime/rest/dashboard.py): a login page, then pages behind the cookie --
    dashboard.install(app, token_ok)

    @api.get(
        "/metrics", response_class=Response, tags=["cluster"],
        summary="Prometheus metrics: subtasks' records and busy/backpressured time, checkpoints, restarts, TaskManagers",
        responses={200: {"content": {"text/plain": {}}}},
    )
    async def prometheus_metrics() -> Response:
        sample = metrics.ClusterSample()
        listed: m.JobList = await dispatcher.list_jobs(m.Empty(), timeout=CALL_TIMEOUT_S)
        for job in listed.jobs:
            if job.status.is_globally_terminal:
                continue  # as Flink: a job's metrics go with it
            ident = m.JobIdMessage(job_id=job.job_id)
            try:
                details: m.JobDetailsMessage = await dispatcher.request_job_details(ident, timeout=CALL_TIMEOUT_S)
                stats = rm.checkpointing_statistics(await dispatcher.request_checkpoint_statistics(ident, timeout=CALL_TIMEOUT_S))
                history: m.JobExceptionsMessage = await dispatcher.request_job_exceptions(ident, timeout=CALL_TIMEOUT_S)
            except (UnknownJobError, RpcError):
                continue  # it ended (and went) meanwhile
            last = stats.latest.completed
            sample.jobs.append(metrics.JobSample(
                details=details, completed_checkpoints=stats.counts.completed, failed_checkpoints=stats.counts.failed,
                last_checkpoint_duration_ms=last.end_to_end_duration or 0 if last is not None else 0,
                last_checkpoint_size=last.state_size if last is not None else 0, restarts=history.num_restarts,
            ))
        tms: m.TaskManagerList = await resource_manager.list_task_managers(m.Empty(), timeout=CALL_TIMEOUT_S)
        sample.task_managers = tms.task_managers
        return Response(content=metrics.render(sample, rates), media_type=metrics.CONTENT_TYPE)

    rates = metrics.RateTracker()

    # --- cluster ---------------------------------------------------------------------------
    @api.get("/overview", response_model=rm.Overview, tags=["cluster"], summary="Cluster overview (Flink: /overview)")
    async def overview() -> rm.Overview:
        jobs: m.ClusterOverviewMessage = await dispatcher.request_cluster_overview(m.Empty(), timeout=CALL_TIMEOUT_S)
        tms: m.TaskManagerList = await resource_manager.list_task_managers(m.Empty(), timeout=CALL_TIMEOUT_S)
        return rm.Overview(
            taskmanagers=len(tms.task_managers),
            slots_total=sum(t.slots_total for t in tms.task_managers),
            slots_available=sum(t.slots_free for t in tms.task_managers),
            jobs_running=jobs.jobs_running, jobs_finished=jobs.jobs_finished,
            jobs_cancelled=jobs.jobs_cancelled, jobs_failed=jobs.jobs_failed,
            millrace_version=__version__,
        )

    @api.get("/config", response_model=rm.DashboardConfig, tags=["cluster"], summary="UI configuration (Flink: /config)")
    async def config() -> rm.DashboardConfig:
        offset_s = -(time.altzone if time.localtime().tm_isdst > 0 else time.timezone)
        return rm.DashboardConfig(
            refresh_interval=3000, timezone_name=time.tzname[0], timezone_offset=offset_s * 1000,
            millrace_version=__version__, features={"web-submit": False, "web-cancel": True, "web-history": False},
        )

    @api.get("/cluster", response_model=rm.ClusterInfo, tags=["cluster"], summary="This cluster's mode, process and application")
    async def cluster_info() -> rm.ClusterInfo:
        return hooks.info()

    @api.delete("/cluster", status_code=202, response_model=Accepted, tags=["cluster"], summary="Shut the cluster down (Flink: DELETE /cluster)")
    async def shutdown_cluster() -> Accepted:
        log.info("[REST] cluster shutdown requested")
        hooks.shutdown()
        return Accepted(message="the cluster is shutting down; running jobs are cancelled")

    @api.get("/taskmanagers", response_model=rm.TaskManagersList, tags=["cluster"], summary="TaskManagers (Flink: /taskmanagers)")
    async def task_managers() -> rm.TaskManagersList:
        tms: m.TaskManagerList = await resource_manager.list_task_managers(m.Empty(), timeout=CALL_TIMEOUT_S)
        return rm.TaskManagersList(taskmanagers=[rm.task_manager_details(t) for t in tms.task_managers])

    @api.get(
        "/taskmanagers/{tmid}", response_model=rm.TaskManagerDetails, tags=["cluster"], summary="One TaskManager",
        responses={404: {"model": rm.ErrorResponse, "description": "unknown TaskManager"}},
    )
    async def task_manager(tmid: str = Path(description="TaskManager id", max_length=1024)) -> rm.TaskManagerDetails:
        tms: m.TaskManagerList = await resource_manager.list_task_managers(m.Empty(), timeout=CALL_TIMEOUT_S)
        for t in tms.task_managers:
            if t.tm_id == tmid:
                return rm.task_manager_details(t)
        raise ApiError(404, f"unknown TaskManager {tmid!r}: it never registered here, or it was released or lost")

    @api.get(
        "/taskmanagers/{tmid}/stdout", response_class=Response, tags=["cluster"],
        summary="What a TaskManager's tasks printed, its newest 1 MiB (Flink: /taskmanagers/:id/stdout)",
        responses={200: {"content": {"text/plain": {}}}, 404: {"model": rm.ErrorResponse, "description": "unknown TaskManager"}},
    )
    async def task_manager_stdout(tmid: str = Path(description="TaskManager id", max_length=1024)) -> Response:
        tail: m.TaskManagerStdoutTail = await resource_manager.request_task_manager_stdout(m.TaskManagerIdMessage(tm_id=tmid), timeout=CALL_TIMEOUT_S)
        if not tail.known:
            raise ApiError(404, f"unknown TaskManager {tmid!r}: it never registered here, or it was released or lost long ago")
        return Response(content=tail.text, media_type="text/plain; charset=utf-8")

    @api.get(
        "/taskmanagers/{tmid}/log", response_class=Response, tags=["cluster"],
        summary="A TaskManager's log records (INFO and up), its newest 1 MiB (Flink: /taskmanagers/:id/log)",
        responses={200: {"content": {"text/plain": {}}}, 404: {"model": rm.ErrorResponse, "description": "unknown TaskManager"}},
    )
    async def task_manager_log(tmid: str = Path(description="TaskManager id", max_length=1024)) -> Response:
        tail: m.TaskManagerStdoutTail = await resource_manager.request_task_manager_stdout(
            m.TaskManagerIdMessage(tm_id=tmid, stream="log"), timeout=CALL_TIMEOUT_S
        )
        if not tail.known:
            raise ApiError(404, f"unknown TaskManager {tmid!r}: it never registered here, or it was released or lost long ago")
        return Response(content=tail.text, media_type="text/plain; charset=utf-8")

    @api.put(
        "/cluster/taskmanagers", response_model=Accepted, tags=["cluster"],
        summary="Run this many TaskManagers from now on: start the missing ones, release the surplus (reactive jobs follow)",
    )
    async def scale_cluster(body: rm.TaskManagerCountRequest) -> Accepted:
        ack: m.Ack = await resource_manager.set_task_manager_count(m.TaskManagerCount(task_managers=body.taskmanagers), timeout=CALL_TIMEOUT_S)
        if not ack.ok:
            raise ApiError(400, ack.message)
        log.info("[REST] cluster scaled to %d TaskManager(s)", body.taskmanagers)
        return Accepted(message=ack.message)

    # --- jobs ------------------------------------------------------------------------------
    @api.get("/jobs", response_model=rm.JobIdsWithStatus, tags=["jobs"], summary="Job ids and states (Flink: /jobs)")
    async def jobs() -> rm.JobIdsWithStatus:
        listed: m.JobList = await dispatcher.list_jobs(m.Empty(), timeout=CALL_TIMEOUT_S)
        return rm.JobIdsWithStatus(jobs=[rm.JobIdWithStatus(id=j.job_id, status=j.status) for j in listed.jobs])

    @api.get("/jobs/overview", response_model=rm.MultipleJobsDetails, tags=["jobs"], summary="Jobs with name, state and times (Flink: /jobs/overview)")
    async def jobs_overview() -> rm.MultipleJobsDetails:
        listed: m.JobList = await dispatcher.list_jobs(m.Empty(), timeout=CALL_TIMEOUT_S)
        now = _now_ms()
        return rm.MultipleJobsDetails(jobs=[rm.job_overview(j, now) for j in listed.jobs])

    body_spec, job_graph_defs = _job_graph_openapi()

    @api.post(
        "/jobs", status_code=202, response_model=rm.JobSubmitResponse, tags=["jobs"],
        summary="Submit a JobGraph (user functions as base64 cloudpickle)", openapi_extra={"requestBody": body_spec},
    )
    async def submit_job(request: Request) -> rm.JobSubmitResponse:
        raw = await request.body()
        if not raw.strip():
            raise ApiError(400, "the request body must be a JobGraph as JSON (build one with env.get_job_graph())")
        if len(raw) > MAX_JOB_GRAPH_BYTES:
            raise ApiError(413, f"the JobGraph is {len(raw)} bytes; at most {MAX_JOB_GRAPH_BYTES} are accepted")
        try:
            job_graph = JobGraph.model_validate_json(raw)
        except pydantic.ValidationError as e:
            if any(err.get("type") == "json_invalid" for err in e.errors()):
                raise ApiError(400, f"the request body is not valid JSON: {e.errors()[0].get('msg')}") from None
            raise ApiError(400, _describe_validation(e.errors(), "the body is not a valid JobGraph")) from None
        validate_job_graph(job_graph)  # JobGraphValidationError is a ValueError: 400
        try:
            resp: m.JobIdMessage = await dispatcher.submit_job(m.SubmitJob(job_graph_json=job_graph.model_dump_json()), timeout=SUBMIT_TIMEOUT_S)
        except (RpcError, ValueError, UnknownJobError, NotLeaderError):
            raise  # their handlers: 503/400/404/503 (a standby: the client goes to the leader)
        except (KeyError, TypeError, AttributeError, ArithmeticError, MillraceError) as e:
            # the Dispatcher or the JobMaster it starts tripped over the graph's content
            raise ApiError(400, f"job {job_graph.job_id} '{job_graph.job_name}' was refused: {type(e).__name__}: {e}") from None
        log.info("[REST] job %s '%s' submitted", resp.job_id, job_graph.job_name)
        return rm.JobSubmitResponse(jobid=resp.job_id, job_url=f"/jobs/{resp.job_id}")

    @api.get("/jobs/{jobid}", response_model=rm.JobDetails, responses=not_found, tags=["jobs"], summary="Job details (Flink: /jobs/:jobid)")
    async def job_details(jobid: str = _JOB_ID) -> rm.JobDetails:
        d: m.JobDetailsMessage = await dispatcher.request_job_details(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        return rm.job_details(d, _now_ms())

    @api.patch(
        "/jobs/{jobid}", status_code=202, response_model=Accepted, tags=["jobs"], summary="Cancel a job (Flink: PATCH /jobs/:jobid?mode=cancel)",
        responses={**not_found, 409: {"model": rm.ErrorResponse, "description": "the job already ended"}},
    )
    async def cancel_job(jobid: str = _JOB_ID, mode: Literal["cancel"] = Query("cancel", description="only 'cancel'")) -> Accepted:
        ack: m.Ack = await dispatcher.cancel_job(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        if not ack.ok:
            raise ApiError(409, ack.message or f"job {jobid} cannot be cancelled")
        log.info("[REST] job %s: cancellation requested", jobid)
        return Accepted(message=f"cancellation of job {jobid} requested")

    @api.get(
        "/jobs/{jobid}/execution-result",
        responses={**not_found, 200: {"model": m.JobResultMessage, "description": "the result; a non-terminal status means: ask again"}},
        tags=["jobs"], summary="The job's result; long-polls ~5 s (Flink: /jobs/:jobid/execution-result)",
    )
    async def execution_result(jobid: str = _JOB_ID) -> Response:
        res: m.JobResultMessage = await dispatcher.request_job_result(m.JobIdMessage(job_id=jobid), timeout=RESULT_TIMEOUT_S)
        # the message itself (accumulators as base64 cloudpickle), so clients get exactly what the Dispatcher has
        return Response(content=res.model_dump_json(), media_type="application/json")

    @api.get("/jobs/{jobid}/plan", responses=not_found, tags=["jobs"], summary="The job's plan: vertices, their chains, inputs and groups")
    async def job_plan(jobid: str = _JOB_ID) -> dict[str, Any]:
        import json

        plan: m.JobPlanMessage = await dispatcher.request_job_plan(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        summary: dict[str, Any] = json.loads(plan.summary_json)
        return summary

    @api.get(
        "/jobs/{jobid}/plan.svg", response_class=Response, tags=["jobs"], summary="A picture of the job's plan (SVG)",
        responses={200: {"content": {"image/svg+xml": {}}}, **not_found},
    )
    async def job_plan_svg(jobid: str = _JOB_ID) -> Response:
        plan: m.JobPlanMessage = await dispatcher.request_job_plan(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        return Response(content=plan.svg, media_type="image/svg+xml")

    @api.get(
        "/jobs/{jobid}/exceptions", response_model=rm.JobExceptions, responses=not_found, tags=["jobs"],
        summary="Root exception, exception history (newest first) and restarts (Flink: /jobs/:jobid/exceptions)",
    )
    async def job_exceptions(jobid: str = _JOB_ID) -> rm.JobExceptions:
        job = m.JobIdMessage(job_id=jobid)
        d: m.JobDetailsMessage = await dispatcher.request_job_details(job, timeout=CALL_TIMEOUT_S)
        history: m.JobExceptionsMessage = await dispatcher.request_job_exceptions(job, timeout=CALL_TIMEOUT_S)
        return rm.job_exceptions(d, history)

    @api.get(
        "/jobs/{jobid}/checkpoints", response_model=rm.CheckpointingStatistics, responses=not_found, tags=["jobs"],
        summary="Checkpoint counts, latest and history, and the job's checkpointing settings (Flink: /jobs/:jobid/checkpoints)",
    )
    async def job_checkpoints(jobid: str = _JOB_ID) -> rm.CheckpointingStatistics:
        stats: m.CheckpointStatisticsMessage = await dispatcher.request_checkpoint_statistics(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        return rm.checkpointing_statistics(stats)

    @api.get("/jobs/{jobid}/history", response_model=rm.JobHistory, responses=not_found, tags=["jobs"], summary="Every status change since CREATED")
    async def job_history(jobid: str = _JOB_ID) -> rm.JobHistory:
        hist: m.JobList = await dispatcher.request_job_history(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        # the Dispatcher's history carries the cause in job_name (see Dispatcher.request_job_history)
        return rm.JobHistory(history=[rm.JobStatusChange(status=h.status, timestamp=h.start_time_ms, cause=h.job_name or None) for h in hist.jobs])

    # --- resource requirements (Flink 1.18: /jobs/:jobid/resource-requirements) ---------------------
    @api.get(
        "/jobs/{jobid}/resource-requirements", response_model=dict[str, rm.VertexResourceRequirements], responses=not_found, tags=["jobs"],
        summary="Each vertex's parallelism bounds (Flink: GET /jobs/:jobid/resource-requirements)",
    )
    async def resource_requirements(jobid: str = _JOB_ID) -> dict[str, rm.VertexResourceRequirements]:
        req: m.JobResourceRequirements = await dispatcher.request_job_resource_requirements(m.JobIdMessage(job_id=jobid), timeout=CALL_TIMEOUT_S)
        return {
            v: rm.VertexResourceRequirements(parallelism=rm.ParallelismBounds(lower_bound=b.lower_bound, upper_bound=b.upper_bound))
            for v, b in req.requirements.items()
        }

    @api.put(
        "/jobs/{jobid}/resource-requirements", response_model=Accepted, tags=["jobs"],
        responses={**not_found, 409: {"model": rm.ErrorResponse, "description": "the job's scheduler has a fixed parallelism"}},
        summary="New parallelism bounds per vertex: the adaptive scheduler rescales the job (Flink: PUT /jobs/:jobid/resource-requirements)",
    )
    async def update_resource_requirements(body: dict[str, rm.VertexResourceRequirements], jobid: str = _JOB_ID) -> Accepted:
        problems = [f"vertex {v!r}: lower bound {r.parallelism.lower_bound} is above upper bound {r.parallelism.upper_bound}"
                    for v, r in body.items() if r.parallelism.lower_bound > r.parallelism.upper_bound]
        if not body:
            problems.append("no vertex given: send {\"<vertex id>\": {\"parallelism\": {\"lowerBound\": 1, \"upperBound\": N}}}")
        if problems:
            raise ApiError(400, "; ".join(problems))
        requirements = {v: m.VertexParallelismBounds(lower_bound=r.parallelism.lower_bound, upper_bound=r.parallelism.upper_bound) for v, r in body.items()}
        ack: m.Ack = await dispatcher.update_job_resource_requirements(
            m.JobResourceRequirements(job_id=jobid, requirements=requirements), timeout=CALL_TIMEOUT_S
        )
        if not ack.ok:
            raise ApiError(409 if "scheduler, whose parallelism is fixed" in ack.message else 400, ack.message)
        log.info("[REST] job %s: resource requirements changed", jobid)
        return Accepted(message=f"resource requirements of job {jobid} changed")

    # --- savepoints (Flink: /jobs/:jobid/savepoints, /jobs/:jobid/stop) ---------------------------
    conflict: dict[int | str, dict[str, Any]] = {409: {"model": rm.ErrorResponse, "description": "the job is not running"}}

    async def _trigger(jobid: str, target: str | None, stop: bool, drain: bool) -> rm.TriggerResponse:
        trig: m.SavepointTriggerId = await dispatcher.trigger_savepoint(
            m.TriggerSavepoint(job_id=jobid, target_directory=target, stop=stop, drain=drain), timeout=CALL_TIMEOUT_S
        )
        log.info("[REST] job %s: %s triggered (%s)", jobid, "stop-with-savepoint" if stop else "savepoint", trig.trigger_id)
        return rm.TriggerResponse(request_id=trig.trigger_id)

    @api.post(
        "/jobs/{jobid}/savepoints", status_code=202, response_model=rm.TriggerResponse, responses={**not_found, **conflict}, tags=["savepoints"],
        summary="Trigger a savepoint; poll GET /jobs/{jobid}/savepoints/{triggerid} (Flink: POST /jobs/:jobid/savepoints)",
    )
    async def trigger_savepoint(body: rm.SavepointTriggerRequest | None = None, jobid: str = _JOB_ID) -> rm.TriggerResponse:
        body = body or rm.SavepointTriggerRequest()
        return await _trigger(jobid, body.target_directory, body.cancel_job, False)

    @api.post(
        "/jobs/{jobid}/stop", status_code=202, response_model=rm.TriggerResponse, responses={**not_found, **conflict}, tags=["savepoints"],
        summary="Stop the job with a savepoint (FINISHED once it completed); poll the trigger (Flink: POST /jobs/:jobid/stop)",
    )
    async def stop_with_savepoint(body: rm.StopWithSavepointRequest | None = None, jobid: str = _JOB_ID) -> rm.TriggerResponse:
        body = body or rm.StopWithSavepointRequest()
        return await _trigger(jobid, body.target_directory, True, body.drain)

    @api.get(
        "/jobs/{jobid}/savepoints/{triggerid}", response_model=rm.SavepointStatusResponse, responses=not_found, tags=["savepoints"],
        summary="Status of a savepoint trigger: IN_PROGRESS, or COMPLETED with a location or a failure cause",
    )
    async def savepoint_status(
        jobid: str = _JOB_ID, triggerid: str = Path(description="the trigger id", min_length=1, max_length=64)
    ) -> rm.SavepointStatusResponse:
        st: m.SavepointStatus = await dispatcher.request_savepoint_status(m.SavepointStatusRequest(job_id=jobid, trigger_id=triggerid), timeout=CALL_TIMEOUT_S)
        if st.status == "IN_PROGRESS":
            return rm.SavepointStatusResponse(status=rm.QueueStatus(id="IN_PROGRESS"))
        failure = rm.ErrorResponse(errors=[st.failure.describe()]) if st.failure is not None else None
        return rm.SavepointStatusResponse(status=rm.QueueStatus(id="COMPLETED"), operation=rm.SavepointOperation(location=st.location, failure_cause=failure))

    @api.post(
        "/jobs/{jobid}/coordinators/{operatorid}", response_model=rm.CoordinationPayload, responses=not_found, tags=["jobs"],
        summary="A request to an operator's coordinator, e.g. collect (Flink: /jobs/:jobid/coordinators/:operatorid)",
    )
    async def coordination_request(
        body: rm.CoordinationPayload, jobid: str = _JOB_ID, operatorid: int = Path(description="the operator's node id", ge=0, le=2**31 - 1)
    ) -> rm.CoordinationPayload:
        try:
            payload = base64.b64decode(body.payload, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "payload must be base64 (of a cloudpickled request)") from None
        try:
            resp: m.CoordinationResponse = await dispatcher.send_coordination_request(
                m.CoordinationRequest(job_id=jobid, node_id=operatorid, payload=payload), timeout=CALL_TIMEOUT_S
            )
        except (UnknownJobError, RpcError):
            raise
        except Exception as e:  # noqa: BLE001 - an undecodable request, or the coordinator refused it
            raise ApiError(400, f"the coordinator of operator {operatorid} of job {jobid} could not handle the request: {type(e).__name__}: {e}") from None
        return rm.CoordinationPayload(payload=base64.b64encode(resp.payload).decode())

    app.include_router(api)

    # the JobGraph body is read raw (so its bytes fields are base64 as in JSON), so its schema is added by hand
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = default_openapi()
            schema.setdefault("components", {}).setdefault("schemas", {}).update(job_graph_defs)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to extend the generated schema
    return app
