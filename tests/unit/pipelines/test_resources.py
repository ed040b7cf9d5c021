"""Resources: configuration, locations, and how the cluster resource follows, fails and cancels a job."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from dagster import EnvVar, Failure, job, op
from dagster._core.errors import DagsterExecutionInterruptedError

from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
from resources.millrace import FAILURE_CAUSE, FAILURE_JOB_ID, SubmittedJob, summarize_run, vertex_records_from_details
from resources.millrace_client import EmbeddedMillraceClient, SessionMillraceClient
from runtime.api.common import Types
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import JobExecutionResult
from runtime.core.errors import ConfigurationError, JobExecutionError
from runtime.core.states import JobStatus
from runtime.deploy.cluster_file import ClusterEndpoint, write_cluster_file
from runtime.rpc.messages import ErrorInfo

pytestmark = pytest.mark.unit


# -- test doubles -----------------------------------------------------------------------------------
@dataclass
class FakeJobClient:
    """A JobClient whose answers are settable callables (no cluster behind it)."""

    job_id: str = "f" * 32
    statuses: list[JobStatus] = field(default_factory=lambda: [JobStatus.RUNNING, JobStatus.FINISHED])
    result: Callable[[], JobExecutionResult] | None = None
    on_status: Callable[[int], None] = lambda n: None
    cancels: int = 0
    closed: bool = False
    _calls: int = 0

    def get_job_status(self) -> JobStatus:
        self._calls += 1
        self.on_status(self._calls)
        if self.cancels:
            return JobStatus.CANCELED
        return self.statuses[min(self._calls - 1, len(self.statuses) - 1)]

    def get_job_execution_result(self, timeout: float | None = None) -> JobExecutionResult:
        assert self.result is not None
        return self.result()

    def cancel(self) -> None:
        self.cancels += 1

    def close(self) -> None:
        self.closed = True


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def __getattr__(self, level: str) -> Callable[[str], None]:
        return lambda msg, *a, **k: self.lines.append((level, msg))

    def text(self) -> str:
        return "\n".join(m for _, m in self.lines)


@dataclass
class FakeContext:
    log: RecordingLog = field(default_factory=RecordingLog)


def _job_graph(name: str = "tiny") -> Any:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_collection([1, 2, 3], type_info=Types.LONG()).map(lambda x: x * 2, output_type=Types.LONG()).key_by(lambda x: x).map(lambda x: x).print()
    return env.get_job_graph(name)


def _resource(**kw: Any) -> MillraceClusterResource:
    return MillraceClusterResource(provider="local", spark=SparkResource(), progress_interval_s=0.0, cancel_timeout_s=2.0, **kw)


def _result(graph: Any, job_id: str) -> JobExecutionResult:
    names = [v.name for v in graph.topological_vertices()]
    metrics = {names[0]: {"records_in": 0, "records_out": 3, "parallelism": 1}, names[-1]: {"records_in": 3, "records_out": 0, "parallelism": 2}}
    return JobExecutionResult(job_id, graph.job_name, JobStatus.FINISHED, 1234, 1000, {"delta_records": 3, "blob": object()}, metrics)


# -- configuration ----------------------------------------------------------------------------------
def test_resource_fields_are_documented_with_defaults():
    for cls in (SparkResource, MillraceClusterResource, DeltaWarehouseResource):
        for name, f in cls.model_fields.items():
            if "resource_dependency" in f.metadata:
                continue  # a nested resource (MillraceClusterResource.spark): Dagster rewrites the field
            assert f.description, f"{cls.__name__}.{name} has no description"
    assert MillraceClusterResource.model_fields["mode"].default == "embedded"
    assert SparkResource.model_fields["master"].default.startswith("local[")


def test_spark_resource_is_lazy_and_uses_the_session_factory_config():
    r = SparkResource(master="local[3]", app_name="x", spark_config={"spark.executor.memory": "1g", "spark.sql.shuffle.partitions": 4})
    r.setup_for_execution(None)  # type: ignore[arg-type]  # the resource does not use its Dagster context
    assert not r.is_started  # no JVM until someone asks for the session
    cfg = r.session_config()
    assert (cfg.master, cfg.app_name) == ("local[3]", "x")
    assert cfg.extra_conf == {"spark.executor.memory": "1g", "spark.sql.shuffle.partitions": "4"}


def test_warehouse_locations(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    wh = DeltaWarehouseResource(base_path="wh")
    assert wh.table_path("windowed_sum") == str(tmp_path / "wh" / "windowed_sum")
    assert wh.checkpoint_path("job-a") == str(tmp_path / "wh" / "_checkpoints" / "job-a")
    assert wh.savepoint_path("job-a") == str(tmp_path / "wh" / "_savepoints" / "job-a")
    other = DeltaWarehouseResource(base_path="s3://bucket/wh/", savepoints_path="/sp")
    assert other.table_path("t") == "s3://bucket/wh/t" and other.savepoint_path("j") == "/sp/j"
    assert wh.resolve("t") == wh.table_path("t") and wh.resolve("./x/t") == str(tmp_path / "x" / "t")
    for bad in ("", "../up", "a/../b", "/abs", "sp ace"):
        with pytest.raises(ConfigurationError):
            wh.table_path(bad)


def test_session_endpoint_from_url_and_token_or_cluster_file(tmp_path):
    r = _resource(mode="session", url="http://127.0.0.1:1/", token="tok")
    ep = r.endpoint()
    assert (ep.url, ep.token) == ("http://127.0.0.1:1", "tok")
    write_cluster_file(ClusterEndpoint(url="http://127.0.0.1:2", token="filetok", pid=1), tmp_path)
    ep = _resource(mode="session", cluster_file=str(tmp_path)).endpoint()
    assert (ep.url, ep.token) == ("http://127.0.0.1:2", "filetok")
    with pytest.raises(ConfigurationError, match="millrace cluster start"):
        _resource(mode="session", cluster_file=str(tmp_path / "none")).endpoint()


def test_session_url_and_token_from_env_vars(monkeypatch):
    monkeypatch.setenv("MILLRACE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("MILLRACE_TOKEN", "secret")

    @op
    def where(millrace: MillraceClusterResource) -> str:
        ep = millrace.endpoint()
        return f"{ep.url} {ep.token}"

    @job
    def j() -> None:
        where()

    res = MillraceClusterResource(mode="session", url=EnvVar("MILLRACE_URL"), token=EnvVar("MILLRACE_TOKEN"), spark=SparkResource())
    out = j.execute_in_process(resources={"millrace": res})
    assert out.output_for_node("where") == "http://127.0.0.1:9 secret"


def test_get_client_returns_the_modes_client_and_detached_or_savepoints_need_a_session_cluster():
    resource = _resource()
    client = resource.get_client()
    assert isinstance(client, EmbeddedMillraceClient) and resource.get_client() is client  # it keeps its attached jobs
    with pytest.raises(ConfigurationError, match="session"):
        client.executor(detached=True)
    with pytest.raises(ConfigurationError, match="session cluster"):
        _resource().rest()
    for call in (lambda: client.trigger_savepoint("j"), lambda: client.stop_with_savepoint("j"), lambda: client.latest_checkpoint_path("j")):
        with pytest.raises(ConfigurationError, match="needs a session cluster"):
            call()
    session = MillraceClusterResource(mode="session", url="http://127.0.0.1:9", token="t", spark=SparkResource()).get_client()
    assert isinstance(session, SessionMillraceClient) and session.endpoint.url == "http://127.0.0.1:9"


# -- following a job --------------------------------------------------------------------------------
def test_wait_logs_transitions_and_summarizes_the_run():
    graph = _job_graph()
    client = FakeJobClient()
    client.result = lambda: _result(graph, client.job_id)
    job = SubmittedJob(client, graph, detached=False)
    job.listener(client.job_id, JobStatus.RUNNING, None)
    job.listener(client.job_id, JobStatus.FINISHED, None)
    ctx = FakeContext()
    run = _resource().wait(job, context=ctx)
    assert "-> RUNNING" in ctx.log.text() and "-> FINISHED" in ctx.log.text()
    assert run.job_id == client.job_id and run.status == "FINISHED" and run.duration_ms == 1234
    assert (run.records_in, run.records_out) == (3, 3)
    assert run.chains == len(graph.topological_vertices()) and run.slots == graph.slots_required() and run.parallelism == 2
    assert "blob" not in run.accumulators and run.accumulators["delta_records"] == 3  # JSON-friendly only
    meta = run.metadata()
    assert meta["millrace_job_id"] == client.job_id and "slot" in meta["plan"].value
    assert client.closed and client.cancels == 0


def test_the_final_transition_is_logged_even_when_the_status_watcher_delivers_it_late():
    """The job's status poll can see FINISHED before the client's watcher thread has passed it on;
    fetching the result waits for the watcher, so the transition is logged after that."""
    graph = _job_graph()
    client = FakeJobClient(statuses=[JobStatus.FINISHED])
    job = SubmittedJob(client, graph, detached=False)

    def result_after_the_watcher_delivers() -> JobExecutionResult:
        job.listener(client.job_id, JobStatus.FINISHED, None)
        return _result(graph, client.job_id)

    client.result = result_after_the_watcher_delivers
    ctx = FakeContext()
    _resource().wait(job, context=ctx)
    assert f"Millrace job {client.job_id} 'tiny' -> FINISHED" in ctx.log.text()


def test_failed_job_raises_failure_with_job_id_and_cause():
    graph = _job_graph()
    client = FakeJobClient(statuses=[JobStatus.RUNNING, JobStatus.FAILED])
    cause = ErrorInfo(type_name="ValueError", message="record 7 is poisoned", task="map (1/2)#0")

    def fail() -> JobExecutionResult:
        raise JobExecutionError(f"job {client.job_id} 'tiny' FAILED: ValueError: record 7 is poisoned", job_id=client.job_id, cause=cause)

    client.result = fail
    with pytest.raises(Failure) as info:
        _resource().wait(SubmittedJob(client, graph, detached=False), context=FakeContext())
    meta = info.value.metadata
    assert meta[FAILURE_JOB_ID].value == client.job_id
    assert "record 7 is poisoned" in meta[FAILURE_CAUSE].value
    assert client.cancels == 0 and client.closed  # a failed job is over: nothing to cancel


def test_interrupted_step_cancels_the_job():
    graph = _job_graph()

    def interrupt(n: int) -> None:
        if n == 3:  # the run is terminated while the job runs
            raise DagsterExecutionInterruptedError()

    client = FakeJobClient(statuses=[JobStatus.RUNNING], on_status=interrupt)
    ctx = FakeContext()
    with pytest.raises(DagsterExecutionInterruptedError):
        _resource().wait(SubmittedJob(client, graph, detached=False), context=ctx)
    assert client.cancels == 1 and client.closed
    assert "CANCELED after the cancel" in ctx.log.text()


def test_timeout_cancels_the_job():
    client = FakeJobClient(statuses=[JobStatus.RUNNING])
    job = SubmittedJob(client, _job_graph(), detached=False, submitted_at=time.monotonic() - 10)
    with pytest.raises(TimeoutError):
        _resource().wait(job, context=FakeContext(), timeout_s=5)
    assert client.cancels == 1 and client.closed


def test_progress_records_from_rest_job_details():
    details = {
        "vertices": [
            {"name": "src", "metrics": {"read-records": 0, "write-records": 10}},
            {"name": "sink", "metrics": {"read-records": 7, "write-records": 0}},
        ]
    }
    assert vertex_records_from_details(details) == {"src": (0, 10), "sink": (7, 0)}
    assert vertex_records_from_details({}) == {}


def test_summarize_run_without_metrics():
    graph = _job_graph()
    run = summarize_run(graph, JobExecutionResult("j", "tiny", JobStatus.FINISHED))
    assert run.records_in == 0 and run.records_out is None
