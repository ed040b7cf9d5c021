"""The REST app over test-double gateways: token, status codes, error bodies (in-process ASGI, no sockets)."""
from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import cloudpickle
import pytest

from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import RpcError, UnknownJobError
from runtime.core.states import JobStatus
from runtime.jobmanager.dispatcher import JobSubmissionError
from runtime.rest.app import create_app
from runtime.rest.models import ClusterInfo
from runtime.rpc import messages as m
from tests.unit.rest._asgi import call
from tests.unit.rest._fault_tolerance import checkpoint_statistics_message, failed_job_details, job_exceptions_message

TOKEN = "s3cret-token"


class TestingGateway:
    """Gateway double: each RPC method is a settable callable(msg) -> reply; unset ones are unknown jobs."""

    __test__ = False

    def __init__(self, **methods: Callable[[Any], Any]) -> None:
        self.methods = dict(methods)
        self.calls: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        async def invoke(msg: Any = None, timeout: float = 30.0) -> Any:
            self.calls.append((name, msg))
            fn = self.methods.get(name)
            if fn is None:
                raise UnknownJobError(f"unknown job id {getattr(msg, 'job_id', '?')}")
            return fn(msg)

        return invoke


class TestingHooks:
    __test__ = False

    def __init__(self) -> None:
        self.shutdowns = 0

    def info(self) -> ClusterInfo:
        return ClusterInfo(mode="session", started_at_ms=1, pid=2, millrace_version="test")

    def shutdown(self) -> None:
        self.shutdowns += 1


def _tm_list(_: Any = None) -> m.TaskManagerList:
    return m.TaskManagerList(
        task_managers=[m.TaskManagerInfo(tm_id="tm-1", host="h", pid=7, data_port=1, slots_total=2, slots_free=1, heartbeat_age_ms=5)]
    )


@pytest.fixture
def dispatcher() -> TestingGateway:
    return TestingGateway(
        request_cluster_overview=lambda _: m.ClusterOverviewMessage(jobs_running=1, jobs_failed=2),
        list_jobs=lambda _: m.JobList(jobs=[m.JobOverview(job_id="j1", job_name="a", status=JobStatus.RUNNING, start_time_ms=1, duration_ms=1)]),
        submit_job=lambda msg: m.JobIdMessage(job_id=json.loads(msg.job_graph_json)["job_id"]),
    )


@pytest.fixture
def hooks() -> TestingHooks:
    return TestingHooks()


@pytest.fixture
def app(dispatcher: TestingGateway, hooks: TestingHooks) -> Any:
    return create_app(dispatcher, TestingGateway(list_task_managers=_tm_list), TOKEN, hooks)


def _job_graph_json(**changes: Any) -> str:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3]).map(lambda x: x + 1).print()
    data = json.loads(env.get_job_graph("unit").model_dump_json())
    data.update(changes)
    return json.dumps(data)


@pytest.mark.parametrize("token", [None, "wrong", TOKEN + "x", "ünïcode"])
def test_requests_without_the_right_token_are_refused(app: Any, token: str | None) -> None:
    r = call(app, "GET", "/overview", token=token)
    assert r.status == 401
    assert "cluster token" in r.json()["errors"][0]
    assert r.headers["www-authenticate"] == "Bearer"


def test_other_auth_schemes_are_refused(app: Any) -> None:
    r = call(app, "GET", "/jobs", headers={"authorization": f"Basic {TOKEN}"})
    assert r.status == 401


def test_liveness_and_openapi_need_no_token_and_declare_bearer_auth(app: Any) -> None:
    assert call(app, "GET", "/healthz").json() == {"status": "ok"}
    doc = call(app, "GET", "/openapi.json").json()
    assert doc["components"]["securitySchemes"]["ClusterToken"] == {"type": "http", "scheme": "bearer", "description": "the cluster token (cluster.json)"}
    assert doc["paths"]["/overview"]["get"]["security"] == [{"ClusterToken": []}]
    body = doc["paths"]["/jobs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/JobGraph"} and "JobVertex" in doc["components"]["schemas"]


def test_overview_combines_jobs_and_task_managers(app: Any) -> None:
    r = call(app, "GET", "/overview", token=TOKEN)
    assert r.status == 200
    body = r.json()
    assert (body["taskmanagers"], body["slots-total"], body["slots-available"], body["jobs-running"], body["jobs-failed"]) == (1, 2, 1, 1, 2)


def test_submit_returns_202_with_the_job_id(app: Any, dispatcher: TestingGateway) -> None:
    r = call(app, "POST", "/jobs", token=TOKEN, body=_job_graph_json(job_id="abc"))
    assert r.status == 202 and r.json() == {"jobid": "abc", "jobUrl": "/jobs/abc"}
    assert [name for name, _ in dispatcher.calls] == ["submit_job"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", "must be a JobGraph as JSON"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "not a valid JobGraph"),
        ("{}", "job_name: Field required"),
        (None, "parallelism 0"),
    ],
)
def test_bad_submissions_are_400_with_the_reason(app: Any, dispatcher: TestingGateway, body: str | None, expected: str) -> None:
    if body is None:
        data = json.loads(_job_graph_json())
        data["vertices"][0]["parallelism"] = 0
        body = json.dumps(data)
    r = call(app, "POST", "/jobs", token=TOKEN, body=body)
    assert r.status == 400, r.body
    assert expected in r.json()["errors"][0]
    assert not dispatcher.calls  # refused before the Dispatcher


def test_dispatcher_refusal_is_400_with_its_message(app: Any, dispatcher: TestingGateway) -> None:
    def refuse(_: Any) -> Any:
        raise JobSubmissionError("job x needs 9 slots; the cluster can offer at most 4")

    dispatcher.methods["submit_job"] = refuse
    r = call(app, "POST", "/jobs", token=TOKEN, body=_job_graph_json())
    assert r.status == 400 and r.json() == {"errors": ["job x needs 9 slots; the cluster can offer at most 4"]}


def test_unknown_job_is_404_naming_it(app: Any) -> None:
    for method, path in [
        ("GET", "/jobs/nope"), ("GET", "/jobs/nope/exceptions"), ("GET", "/jobs/nope/checkpoints"),
        ("GET", "/jobs/nope/history"), ("PATCH", "/jobs/nope?mode=cancel"),
    ]:
        r = call(app, method, path, token=TOKEN)
        assert r.status == 404 and "unknown job id nope" in r.json()["errors"][0], (method, path, r.body)


def test_cancel_of_an_ended_job_is_409_and_other_modes_400(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["cancel_job"] = lambda msg: m.Ack(ok=False, message=f"job {msg.job_id} already ended FINISHED")
    r = call(app, "PATCH", "/jobs/j1?mode=cancel", token=TOKEN)
    assert r.status == 409 and r.json()["errors"] == ["job j1 already ended FINISHED"]
    r = call(app, "PATCH", "/jobs/j1?mode=stop", token=TOKEN)
    assert r.status == 400 and "mode" in r.json()["errors"][0]


def test_a_jobmanager_that_does_not_answer_is_503(app: Any, dispatcher: TestingGateway) -> None:
    def slow(_: Any) -> Any:
        raise RpcError("call dispatcher.list_jobs timed out after 15.0s")

    dispatcher.methods["list_jobs"] = slow
    r = call(app, "GET", "/jobs", token=TOKEN)
    assert r.status == 503 and "did not answer" in r.json()["errors"][0]


def test_remote_unknown_job_keeps_its_404(app: Any, dispatcher: TestingGateway) -> None:
    def remote(_: Any) -> Any:
        raise RpcError("UnknownJobError: unknown job id zz")

    dispatcher.methods["request_job_details"] = remote
    r = call(app, "GET", "/jobs/zz", token=TOKEN)
    assert r.status == 404 and r.json()["errors"] == ["unknown job id zz"]


def test_unexpected_errors_are_a_generic_500_without_internals(app: Any, dispatcher: TestingGateway) -> None:
    def broken(_: Any) -> Any:
        raise RuntimeError("internal detail /etc/secret")

    dispatcher.methods["list_jobs"] = broken
    r = call(app, "GET", "/jobs/overview", token=TOKEN)
    assert r.status == 500
    assert b"secret" not in r.body and b"Traceback" not in r.body
    assert r.json()["errors"] == ["internal server error; the JobManager log has the details"]


def test_unknown_route_and_method_are_flink_style_errors(app: Any) -> None:
    r = call(app, "GET", "/nothing", token=TOKEN)
    assert r.status == 404 and "no such resource" in r.json()["errors"][0]
    r = call(app, "PUT", "/overview", token=TOKEN)
    assert r.status == 405 and r.json()["errors"]


def test_coordination_round_trip_and_bad_payloads(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["send_coordination_request"] = lambda msg: m.CoordinationResponse(
        payload=cloudpickle.dumps(("echo", cloudpickle.loads(msg.payload), msg.node_id))
    )
    body = json.dumps({"payload": base64.b64encode(cloudpickle.dumps({"n": 3})).decode()})
    r = call(app, "POST", "/jobs/j1/coordinators/5", token=TOKEN, body=body)
    assert r.status == 200
    assert cloudpickle.loads(base64.b64decode(r.json()["payload"])) == ("echo", {"n": 3}, 5)
    r = call(app, "POST", "/jobs/j1/coordinators/5", token=TOKEN, body=json.dumps({"payload": "***"}))
    assert r.status == 400 and "base64" in r.json()["errors"][0]
    r = call(app, "POST", "/jobs/j1/coordinators/5", token=TOKEN, body=json.dumps({"payload": base64.b64encode(b"garbage").decode()}))
    assert r.status == 400 and "could not handle the request" in r.json()["errors"][0]
    r = call(app, "POST", "/jobs/j1/coordinators/99999999999999999999", token=TOKEN, body=body)
    assert r.status == 400


def test_execution_result_carries_the_result_message(app: Any, dispatcher: TestingGateway) -> None:
    result = m.JobResultMessage(job_id="j1", job_name="a", status=JobStatus.FINISHED, duration_ms=5, accumulators_pickle=cloudpickle.dumps({"rows": 3}))
    dispatcher.methods["request_job_result"] = lambda _: result
    r = call(app, "GET", "/jobs/j1/execution-result", token=TOKEN)
    assert r.status == 200
    assert m.JobResultMessage.model_validate_json(r.body) == result


def test_task_managers_and_an_unknown_one(app: Any) -> None:
    r = call(app, "GET", "/taskmanagers", token=TOKEN)
    assert r.status == 200 and r.json()["taskmanagers"][0]["id"] == "tm-1"
    assert call(app, "GET", "/taskmanagers/tm-1", token=TOKEN).json()["freeSlots"] == 1
    r = call(app, "GET", "/taskmanagers/tm-404", token=TOKEN)
    assert r.status == 404 and "tm-404" in r.json()["errors"][0]


def test_cluster_info_and_shutdown(app: Any, hooks: TestingHooks) -> None:
    assert call(app, "GET", "/cluster", token=TOKEN).json()["mode"] == "session"
    r = call(app, "DELETE", "/cluster", token=TOKEN)
    assert r.status == 202 and hooks.shutdowns == 1


# --- fault tolerance: exceptions and checkpoints ---------------------------------------------------
def test_exceptions_have_flinks_history_newest_first_with_restarts(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["request_job_details"] = lambda _: failed_job_details()
    dispatcher.methods["request_job_exceptions"] = lambda _: job_exceptions_message()
    r = call(app, "GET", "/jobs/j1/exceptions", token=TOKEN)
    assert r.status == 200, r.body
    body = r.json()
    assert body["root-exception"].startswith("ValueError: record 7 is poisoned") and body["timestamp"] == 5_000
    assert (body["restarts"], body["restartStrategy"]) == (1, "fixed-delay (1 attempts, 100 ms)")
    history = body["exceptionHistory"]
    assert history["truncated"] is False
    newest, oldest = history["entries"]
    assert (newest["exceptionName"], newest["timestamp"], newest["taskName"], newest["location"]) == ("ValueError", 4_900, "Map (1/2)#1", "tm-2")
    assert newest["taskManagerId"] == "tm-2" and "Traceback" in newest["stacktrace"]
    assert newest["failureLabels"] == {} and newest["concurrentExceptions"] == [] and newest["restartedTasks"] == 0
    assert (oldest["exceptionName"], oldest["timestamp"], oldest["location"], oldest["globalFailure"]) == ("TaskManagerLostError", 3_000, "tm-1", True)
    assert [c["exceptionName"] for c in oldest["concurrentExceptions"]] == ["ProducerFailedError"]
    # the job's root cause was recorded by the scheduler: no duplicate entry for it
    assert [n for n, _ in dispatcher.calls] == ["request_job_details", "request_job_exceptions"]


def test_exceptions_of_a_job_that_never_failed(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["request_job_details"] = lambda _: failed_job_details(error=None)
    dispatcher.methods["request_job_exceptions"] = lambda msg: m.JobExceptionsMessage(job_id=msg.job_id, restart_strategy="none")
    body = call(app, "GET", "/jobs/j1/exceptions", token=TOKEN).json()
    assert body == {
        "root-exception": None, "timestamp": None, "exceptionHistory": {"entries": [], "truncated": False},
        "restarts": 0, "restartStrategy": "none",
    }


def test_checkpoints_have_flinks_shape_with_the_settings(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["request_checkpoint_statistics"] = lambda _: checkpoint_statistics_message()
    r = call(app, "GET", "/jobs/j1/checkpoints", token=TOKEN)
    assert r.status == 200, r.body
    body = r.json()
    assert body["counts"] == {"restored": 1, "total": 3, "in_progress": 1, "completed": 1, "failed": 1}
    assert body["checkpointing"] == {"enabled": True, "interval": 1_000, "mode": "EXACTLY_ONCE", "path": "/warehouse/_checkpoints/j1"}
    latest = body["latest"]
    assert latest["completed"] == {
        "id": 1, "status": "COMPLETED", "is_savepoint": False, "trigger_timestamp": 1_000, "latest_ack_timestamp": 1_150,
        "end_to_end_duration": 150, "commit_duration": 12, "state_size": 3 * 1024 * 1024, "num_subtasks": 2, "num_acknowledged_subtasks": 2,
        "external_path": "/warehouse/_checkpoints/j1", "failure_timestamp": None, "failure_message": None,
    }
    failed = latest["failed"]
    assert (failed["id"], failed["status"], failed["end_to_end_duration"], failed["failure_timestamp"]) == (2, "FAILED", 600, 2_600)
    assert failed["failure_message"].startswith("checkpoint 2 expired") and failed["latest_ack_timestamp"] == -1
    assert latest["restored"] == {"id": 1} and latest["savepoint"] is None
    assert [(c["id"], c["status"]) for c in body["history"]] == [(3, "IN_PROGRESS"), (2, "FAILED"), (1, "COMPLETED")]
    pending = body["history"][0]
    assert (pending["num_acknowledged_subtasks"], pending["latest_ack_timestamp"], pending["end_to_end_duration"]) == (1, 3_100, 100)


def test_a_job_without_checkpointing_has_zero_counts(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["request_checkpoint_statistics"] = lambda msg: m.CheckpointStatisticsMessage(job_id=msg.job_id, enabled=False)
    r = call(app, "GET", "/jobs/j1/checkpoints", token=TOKEN)
    assert r.status == 200, r.body
    assert r.json() == {
        "counts": {"restored": 0, "total": 0, "in_progress": 0, "completed": 0, "failed": 0},
        "latest": {"completed": None, "savepoint": None, "failed": None, "restored": None},
        "history": [],
        "checkpointing": {"enabled": False, "interval": None, "mode": None, "path": None},
    }


def test_checkpoints_of_a_remote_unknown_job_are_404(app: Any, dispatcher: TestingGateway) -> None:
    def remote(_: Any) -> Any:
        raise RpcError("UnknownJobError: unknown job id zz")

    dispatcher.methods["request_checkpoint_statistics"] = remote
    r = call(app, "GET", "/jobs/zz/checkpoints", token=TOKEN)
    assert r.status == 404 and r.json()["errors"] == ["unknown job id zz"]


def test_unreadable_checkpoint_statistics_are_a_500_not_a_400(app: Any, dispatcher: TestingGateway) -> None:
    dispatcher.methods["request_checkpoint_statistics"] = lambda msg: m.CheckpointStatisticsMessage(
        job_id=msg.job_id, enabled=True, statistics_json='{"counts": 5}'
    )
    r = call(app, "GET", "/jobs/j1/checkpoints", token=TOKEN)
    assert r.status == 500 and r.json()["errors"] == ["internal server error; the JobManager log has the details"]


def test_openapi_documents_the_fault_tolerance_endpoints(app: Any) -> None:
    doc = call(app, "GET", "/openapi.json").json()
    schemas = doc["components"]["schemas"]
    ok = doc["paths"]["/jobs/{jobid}/checkpoints"]["get"]["responses"]
    assert ok["200"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/CheckpointingStatistics"} and "404" in ok
    assert set(schemas["CheckpointingStatistics"]["required"]) == {"counts", "latest", "history", "checkpointing"}
    assert schemas["CheckpointStatistics"]["properties"]["status"]["enum"] == ["IN_PROGRESS", "COMPLETED", "FAILED"]
    assert {"restarts", "restartStrategy", "exceptionHistory"} <= set(schemas["JobExceptions"]["properties"])
    assert {"concurrentExceptions", "failureLabels", "location"} <= set(schemas["RootExceptionInfo"]["properties"])
