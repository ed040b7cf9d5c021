"""Millrace clients for Dagster code (Dagster's integration style: a resource's `get_client()`).

`MillraceClusterResource.get_client()` returns one of:
- `EmbeddedMillraceClient`: the Dagster run's process is the JobManager of a per-job cluster;
  TaskManagers on the run's Spark executors ("spark") or local processes ("local"). Attached only;
  it knows only the jobs it submitted itself.
- `SessionMillraceClient`: a long-running session cluster reached over its REST API; attached or
  detached jobs, any job of the cluster, savepoints (trigger, stop-with-savepoint), checkpoints, and
  an adaptive job's details and resource requirements (the autoscaling sensor reads and sets them).

Both follow an attached job the same way: progress (status changes, the plan, records per vertex)
goes to the run log, and if the step is interrupted (the run is terminated from the UI: Dagster
raises DagsterExecutionInterruptedError in the op) or fails, the Millrace job is cancelled before
the step ends. A job that fails raises `dagster.Failure` carrying the Millrace job id and the
failing task's cause as metadata (read by the run-failure sensor).
"""
import abc
import base64
import logging
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dagster import Failure, MetadataValue
from pydantic import BaseModel, Field

from runtime.api.execution import JobClient
from runtime.core.errors import ConfigurationError, JobExecutionError, MillraceError
from runtime.core.states import JobStatus
from runtime.graph.job_graph import JobGraph
from runtime.graph.plan import format_plan, plan_summary
from runtime.graph.plan_render import to_svg

log = logging.getLogger(__name__)

# metadata keys of a failed step (dagster.Failure); the run-failure sensor reads them
FAILURE_JOB_ID = "millrace_job_id"
FAILURE_JOB_NAME = "millrace_job_name"
FAILURE_STATUS = "millrace_status"
FAILURE_CAUSE = "millrace_cause"

class VertexRecords(BaseModel):
    name: str
    parallelism: int
    records_in: int = 0
    records_out: int = 0


class MillraceRun(BaseModel):
    """What a finished (attached) Millrace job reports back to Dagster."""

    job_id: str
    job_name: str
    status: str
    duration_ms: int
    running_ms: int | None = None
    records_in: int = Field(description="records produced by the job's sources")
    records_out: int | None = Field(None, description="records written by its sinks (Delta rows committed), if known")
    chains: int = Field(description="job vertices (operator chains)")
    parallelism: int = Field(description="highest vertex parallelism")
    slots: int = Field(description="task slots the job needs")
    plan: str = Field(description="the execution plan, one line per chain and input")
    plan_svg: str = Field("", description="a picture of the JobGraph (runtime.graph.plan_render), SVG")
    vertices: list[VertexRecords] = Field(default_factory=list)
    accumulators: dict[str, Any] = Field(default_factory=dict, description="JSON-friendly accumulator results")

    def metadata(self) -> dict[str, Any]:
        """Dagster materialization metadata for this run."""
        return {
            "millrace_job_id": self.job_id,
            "millrace_job_name": self.job_name,
            "millrace_status": self.status,
            "duration_ms": self.duration_ms,
            "records_in": self.records_in,
            "records_out": self.records_out if self.records_out is not None else MetadataValue.null(),
            "chains": self.chains,
            "parallelism": self.parallelism,
            "slots": self.slots,
            "plan": MetadataValue.md(f"```\n{self.plan}\n```"),
            # the Dagster UI renders markdown images: the picture travels inline, no file to serve
            "plan_picture": MetadataValue.md(f"![plan of {self.job_name}](data:image/svg+xml;base64,{base64.b64encode(self.plan_svg.encode()).decode()})"),
            "vertices": MetadataValue.json([v.model_dump() for v in self.vertices]),
        }


class _StatusQueue:
    """StatusListener that hands transitions to the waiting thread (context.log is used only there)."""

    def __init__(self) -> None:
        self.q: queue.SimpleQueue[tuple[str, JobStatus, str | None]] = queue.SimpleQueue()

    def __call__(self, job_id: str, status: JobStatus, cause: str | None) -> None:
        self.q.put((job_id, status, cause))

    def drain(self) -> list[tuple[str, JobStatus, str | None]]:
        out = []
        while True:
            try:
                out.append(self.q.get_nowait())
            except queue.Empty:
                return out


@dataclass
class SubmittedJob:
    """A job submitted through the resource: its client, graph and progress feed."""

    client: JobClient
    job_graph: JobGraph
    detached: bool
    listener: _StatusQueue = field(default_factory=_StatusQueue)
    submitted_at: float = field(default_factory=time.monotonic)

    @property
    def job_id(self) -> str:
        return self.client.job_id

    @property
    def job_name(self) -> str:
        return self.job_graph.job_name


def _json_friendly(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool)) or (
        isinstance(value, (list, tuple)) and all(_json_friendly(v) for v in value)
    ) or (isinstance(value, dict) and all(isinstance(k, str) and _json_friendly(v) for k, v in value.items()))


def summarize_run(job_graph: JobGraph, result: Any) -> MillraceRun:
    """A MillraceRun from the job graph and its JobExecutionResult."""
    plan = plan_summary(job_graph)
    vertices = plan["vertices"]
    consumed = {i["source_vertex"] for v in vertices for i in v["inputs"]}
    sources = {v["name"] for v in vertices if not v["inputs"]}
    sinks = {v["name"] for v in vertices if v["number"] not in consumed}
    metrics: dict[str, dict[str, int]] = dict(result.metrics or {})
    records = [
        VertexRecords(name=v["name"], parallelism=v["parallelism"], records_in=int(metrics.get(v["name"], {}).get("records_in", 0)),
                      records_out=int(metrics.get(v["name"], {}).get("records_out", 0)))
        for v in vertices
    ]
    acc = dict(result.accumulators or {})
    delta_records = acc.get("delta_records")
    records_out = int(delta_records) if isinstance(delta_records, int) else (
        sum(r.records_in for r in records if r.name in sinks) if metrics else None
    )
    return MillraceRun(
        job_id=result.job_id,
        job_name=result.job_name,
        status=result.status.name if isinstance(result.status, JobStatus) else str(result.status),
        duration_ms=int(result.net_runtime_ms or 0),
        running_ms=result.running_ms,
        records_in=sum(r.records_out for r in records if r.name in sources),
        records_out=records_out,
        chains=len(vertices),
        parallelism=max((v["parallelism"] for v in vertices), default=0),
        slots=int(plan["slots_required"]),
        plan=format_plan(job_graph),
        plan_svg=to_svg(job_graph),
        vertices=records,
        accumulators={k: v for k, v in acc.items() if _json_friendly(v)},
    )


def vertex_records_from_details(details: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """name -> (records in, records out) from a REST job-details document (Flink's field names)."""
    out: dict[str, tuple[int, int]] = {}
    for v in details.get("vertices") or []:
        m = v.get("metrics") or {}
        rin = m.get("read-records", v.get("records-in", 0)) or 0
        rout = m.get("write-records", v.get("records-out", 0)) or 0
        out[str(v.get("name", v.get("id", "?")))] = (int(rin), int(rout))
    return out


class MillraceClient(abc.ABC):
    """Submit, follow, cancel Millrace jobs (the parts that differ per target are abstract)."""

    def __init__(self, progress_interval_s: float = 10.0, cancel_timeout_s: float = 60.0) -> None:
        self.progress_interval_s = progress_interval_s
        self.cancel_timeout_s = cancel_timeout_s
        self._jobs: dict[str, SubmittedJob] = {}  # attached jobs of this client, until they end

    # --- what differs per target ------------------------------------------------------------
    @abc.abstractmethod
    def executor(self, detached: bool = False) -> Any:
        """The PipelineExecutor jobs are submitted through."""

    @abc.abstractmethod
    def describe(self) -> str:
        """Where jobs go, for the run log."""

    @abc.abstractmethod
    def _remote_status(self, job_id: str) -> JobStatus:
        """Status of a job this client did not submit attached."""

    @abc.abstractmethod
    def list_jobs(self) -> list[dict[str, Any]]:
        """Jobs of the cluster as dicts with Flink's keys (jid, name, state, ...)."""

    @abc.abstractmethod
    def _remote_cancel(self, job_id: str) -> None:
        """Cancel a job this client did not submit attached."""

    def vertex_records(self, job_id: str) -> dict[str, tuple[int, int]]:
        """name -> (records in, records out) per vertex, for progress lines; {} when unknown."""
        return {}

    # --- submit / wait ----------------------------------------------------------------------
    def submit(self, job_graph: JobGraph, *, detached: bool = False, context: Any = None) -> SubmittedJob:
        """Submit `job_graph` (e.g. `env.get_job_graph(name)`); returns at once."""
        logger = _logger(context)
        executor = self.executor(detached)
        listener = _StatusQueue()
        client = executor.execute(job_graph, None if detached else listener)
        job = SubmittedJob(client, job_graph, detached, listener)
        if not detached:
            self._jobs[job.job_id] = job
        logger.info(
            f"Millrace job '{job.job_name}' submitted as {job.job_id} to the {self.describe()}"
            f"{' (detached)' if detached else ''}\n{format_plan(job_graph)}"
        )
        return job

    def run(self, job_graph: JobGraph, context: Any = None, timeout_s: float | None = None) -> MillraceRun:
        """Submit attached and wait for the end; cancels the job if the step is interrupted."""
        return self.wait(self.submit(job_graph, context=context), context=context, timeout_s=timeout_s)

    def wait(self, job: SubmittedJob, context: Any = None, timeout_s: float | None = None) -> MillraceRun:
        """Follow an attached job to its end, logging progress; raises dagster.Failure if it fails."""
        logger = _logger(context)
        tag = f"Millrace job {job.job_id} '{job.job_name}'"
        last_progress = time.monotonic()
        last_records: dict[str, tuple[int, int]] = {}
        try:
            while True:
                self._log_transitions(logger, tag, job)
                status = job.client.get_job_status()
                if status.is_globally_terminal:
                    break
                now = time.monotonic()
                if timeout_s is not None and now - job.submitted_at > timeout_s:
                    raise TimeoutError(f"{tag} still {status.name} after {timeout_s:.0f} s")
                if now - last_progress >= self.progress_interval_s:
                    last_progress = now
                    last_records = self._log_progress(logger, tag, job, status, last_records)
                time.sleep(0.25)
            error: JobExecutionError | None = None
            try:
                result = job.client.get_job_execution_result(timeout=60)
            except JobExecutionError as e:
                error = e
            # only now: fetching the result waits for the status watcher's last transitions
            self._log_transitions(logger, tag, job)
            if error is not None:
                cause = getattr(error, "cause_info", None)
                cause_text = cause.describe() if cause is not None else str(error).split("\n", 1)[0]
                status_now = _status_or(job.client, JobStatus.FAILED)
                logger.error(f"{tag} {status_now.name}: {cause_text}")
                raise Failure(
                    description=f"{tag} ended {status_now.name}: {cause_text}",
                    metadata={
                        FAILURE_JOB_ID: job.job_id,
                        FAILURE_JOB_NAME: job.job_name,
                        FAILURE_STATUS: status_now.name,
                        FAILURE_CAUSE: MetadataValue.text(str(error)),
                    },
                ) from error
        except Failure:
            raise
        except BaseException as e:  # interrupted (run terminated), timed out, or lost the cluster
            # an attached job belongs to this step: never leave it running behind a step that ended
            reason = "the Dagster run was interrupted" if not isinstance(e, Exception) else f"{type(e).__name__}: {e}"
            logger.warning(f"{tag}: {reason}; cancelling the Millrace job")
            self._cancel_and_wait(job, logger)
            raise
        finally:
            job.client.close()
            self._jobs.pop(job.job_id, None)
        run = summarize_run(job.job_graph, result)
        for v in run.vertices:
            logger.info(f"{tag}: {v.name}: in {v.records_in:,} out {v.records_out:,} (parallelism {v.parallelism})")
        logger.info(f"{tag} FINISHED in {run.duration_ms} ms: {run.records_in:,} records read, {run.records_out} written")
        return run

    def _log_transitions(self, logger: Any, tag: str, job: SubmittedJob) -> None:
        for _, status, cause in job.listener.drain():
            logger.info(f"{tag} -> {status.name}{f' ({cause})' if cause else ''}")

    def _log_progress(self, logger: Any, tag: str, job: SubmittedJob, status: JobStatus, last: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        elapsed = time.monotonic() - job.submitted_at
        records: dict[str, tuple[int, int]] = {}
        try:
            records = self.vertex_records(job.job_id)
        except Exception as e:  # noqa: BLE001 - progress is best effort; the status poll reports a lost cluster
            logger.debug(f"{tag}: no progress from the cluster: {e}")
        parts = "; ".join(f"{n}: in {i:,} out {o:,}" for n, (i, o) in records.items())
        logger.info(f"{tag} {status.name} for {elapsed:.0f} s{f' - {parts}' if parts and records != last else ''}")
        return records

    def _cancel_and_wait(self, job: SubmittedJob, logger: Any) -> None:
        try:
            job.client.cancel()
        except Exception as e:  # noqa: BLE001 - it may have ended meanwhile; the status below tells
            logger.warning(f"Millrace job {job.job_id}: cancel request failed: {e}")
        deadline = time.monotonic() + self.cancel_timeout_s
        status = None
        while time.monotonic() < deadline:
            status = _status_or(job.client, None)
            if status is not None and status.is_globally_terminal:
                break
            time.sleep(0.2)
        self._log_transitions(logger, f"Millrace job {job.job_id} '{job.job_name}'", job)
        logger.warning(f"Millrace job {job.job_id} '{job.job_name}' is {status.name if status else 'unreachable'} after the cancel")


    # --- inspect / cancel -------------------------------------------------------------------
    def status(self, job_id: str) -> JobStatus:
        """The job's current status."""
        job = self._jobs.get(job_id)
        return job.client.get_job_status() if job is not None else self._remote_status(job_id)

    def cancel(self, job_id: str, context: Any = None, wait: bool = True) -> JobStatus:
        """Cancel a job; with `wait`, until it reaches a terminal status. Returns the last status seen."""
        logger = _logger(context)
        job = self._jobs.get(job_id)
        if job is not None:
            job.client.cancel()
        else:
            self._remote_cancel(job_id)
        logger.info(f"Millrace job {job_id}: cancel requested")
        status = self.status(job_id)
        deadline = time.monotonic() + self.cancel_timeout_s
        while wait and not status.is_globally_terminal and time.monotonic() < deadline:
            time.sleep(0.2)
            status = self.status(job_id)
        logger.info(f"Millrace job {job_id}: {status.name}")
        return status

    def running_jobs(self, name: str) -> list[str]:
        """Ids of the not yet ended jobs called `name`."""
        return [
            j["jid"] for j in self.list_jobs()
            if j.get("name") == name and not JobStatus(j["state"]).is_globally_terminal
        ]

    def cancel_by_name(self, name: str, context: Any = None, wait: bool = True) -> dict[str, str]:
        """Cancel every running job called `name`; returns {job id: final status}."""
        return {jid: self.cancel(jid, context=context, wait=wait).name for jid in self.running_jobs(name)}

    # --- savepoints (a session cluster's jobs outlive the run that asks) --------------------
    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, context: Any = None) -> str:
        """Take a savepoint of a running job; returns its path once it completed."""
        raise self._needs_session("taking a savepoint of a running job")

    def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, drain: bool = False, context: Any = None) -> str:
        """Stop a running job with a savepoint (FINISHED); returns the savepoint's path."""
        raise self._needs_session("stopping a job with a savepoint")

    def latest_checkpoint_path(self, job_id: str) -> str | None:
        """Where the job's newest completed checkpoint or savepoint can be restored from (None: none)."""
        raise self._needs_session("looking up a job's checkpoints")

    # --- elastic scaling (a session cluster's adaptive jobs; the autoscaling sensor) ----------
    def job_details(self, job_id: str) -> dict[str, Any]:
        """The job's REST details with Flink's keys: state, scheduler, scheduler-state, now, rescales,
        and per vertex id, name, parallelism, maxParallelism, status, tasks, busyTimeMsPerSecond, backpressure-ratio."""
        raise self._needs_session("reading a job's details")

    def resource_requirements(self, job_id: str) -> dict[str, tuple[int, int]]:
        """Each vertex id's (lower, upper) parallelism bound."""
        raise self._needs_session("reading a job's resource requirements")

    def update_resource_requirements(self, job_id: str, bounds: dict[str, tuple[int, int]], context: Any = None) -> None:
        """New (lower, upper) parallelism bounds per vertex id: a job under the adaptive scheduler rescales."""
        raise self._needs_session("changing a job's resource requirements")

    def _needs_session(self, what: str) -> ConfigurationError:
        return ConfigurationError(
            f"{what} needs a session cluster, but this Millrace client is {type(self).__name__}: "
            "set mode: session on the resource (and MILLRACE_URL / MILLRACE_TOKEN, or start one with `millrace cluster start`)"
        )


class EmbeddedMillraceClient(MillraceClient):
    """A per-job cluster inside this process (Flink's MiniCluster); attached jobs only."""

    def __init__(self, provider: str, spark_session: Callable[[], Any], tm_log_level: str = "WARNING", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.provider = provider
        self._spark_session = spark_session
        self.tm_log_level = tm_log_level

    def executor(self, detached: bool = False) -> Any:
        if detached:
            raise ConfigurationError(
                "a detached job outlives the Dagster run, but an embedded cluster ends with it: "
                "submit detached jobs to a session cluster (mode: session)"
            )
        from runtime.deploy.embedded import EmbeddedExecutor

        spark = self._spark_session() if self.provider == "spark" else None
        return EmbeddedExecutor(provider=self.provider, spark=spark, tm_log_level=self.tm_log_level)

    def describe(self) -> str:
        return f"embedded cluster ({self.provider} TaskManagers)"

    def _remote_status(self, job_id: str) -> JobStatus:
        raise self._not_here(job_id)

    def _remote_cancel(self, job_id: str) -> None:
        raise self._not_here(job_id)

    @staticmethod
    def _not_here(job_id: str) -> MillraceError:
        return MillraceError(f"job {job_id} is not running in this process's embedded cluster (was it submitted by this run?)")

    def list_jobs(self) -> list[dict[str, Any]]:
        return [{"jid": j.job_id, "name": j.job_name, "state": _status_or(j.client, JobStatus.RUNNING).name} for j in self._jobs.values()]


class SessionMillraceClient(MillraceClient):
    """A session cluster's REST API (Flink's RestClusterClient)."""

    def __init__(self, endpoint: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.endpoint = endpoint  # runtime.deploy.cluster_file.ClusterEndpoint (url, token)

    def rest(self) -> Any:
        from runtime.deploy.remote import rest_client

        return rest_client(self.endpoint)

    def executor(self, detached: bool = False) -> Any:
        from runtime.deploy.remote import RestExecutor

        return RestExecutor(self.endpoint, detached=detached)

    def describe(self) -> str:
        return f"session cluster {self.endpoint.url}"

    def _details(self, job_id: str) -> dict[str, Any]:
        return self.rest().job_details(job_id).model_dump(by_alias=True, mode="json")

    def _remote_status(self, job_id: str) -> JobStatus:
        return JobStatus(self._details(job_id)["state"])

    def _remote_cancel(self, job_id: str) -> None:
        self.rest().cancel_job(job_id)

    def list_jobs(self) -> list[dict[str, Any]]:
        return [j.model_dump(by_alias=True, mode="json") for j in self.rest().list_jobs()]

    def vertex_records(self, job_id: str) -> dict[str, tuple[int, int]]:
        return vertex_records_from_details(self._details(job_id))

    def trigger_savepoint(self, job_id: str, target_directory: str | None = None, context: Any = None) -> str:
        rest = self.rest()
        path = rest.wait_for_savepoint(job_id, rest.trigger_savepoint(job_id, target_directory))
        _logger(context).info(f"Millrace job {job_id}: savepoint completed at {path}")
        return path

    def stop_with_savepoint(self, job_id: str, target_directory: str | None = None, drain: bool = False, context: Any = None) -> str:
        rest = self.rest()
        path = rest.wait_for_savepoint(job_id, rest.stop_with_savepoint(job_id, target_directory, drain))
        _logger(context).info(f"Millrace job {job_id}: stopped with savepoint {path}")
        return path

    def latest_checkpoint_path(self, job_id: str) -> str | None:
        """The newer of the job's latest savepoint and its retained checkpoint table."""
        stats = self.rest().job_checkpoints(job_id).model_dump(by_alias=True, mode="json")
        latest = stats.get("latest") or {}
        candidates = [c for c in (latest.get("completed"), latest.get("savepoint")) if c and c.get("external_path")]
        if not candidates:
            return None
        return str(max(candidates, key=lambda c: int(c.get("id", 0)))["external_path"])

    def job_details(self, job_id: str) -> dict[str, Any]:
        return self._details(job_id)

    def resource_requirements(self, job_id: str) -> dict[str, tuple[int, int]]:
        return dict(self.rest().resource_requirements(job_id))

    def update_resource_requirements(self, job_id: str, bounds: dict[str, tuple[int, int]], context: Any = None) -> None:
        self.rest().update_resource_requirements(job_id, bounds)
        described = ", ".join(f"{vertex}: {lo}..{hi}" for vertex, (lo, hi) in bounds.items())
        _logger(context).info(f"Millrace job {job_id}: new resource requirements {described}")

def _status_or(client: JobClient, default: Any) -> Any:
    try:
        return client.get_job_status()
    except Exception:  # noqa: BLE001 - the cluster is gone
        return default


class _StdLogger:
    """context.log's interface over the module logger, for calls outside a Dagster step."""

    def __getattr__(self, level: str) -> Any:
        return getattr(log, level)


def _logger(context: Any) -> Any:
    return context.log if context is not None and getattr(context, "log", None) is not None else _StdLogger()
