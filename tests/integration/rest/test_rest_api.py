"""The REST API in front of a real cluster: submit, watch, inspect, cancel, and every bad input's 4xx."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections import Counter
from typing import Any

import numpy as np
import pytest

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import use_executor
from runtime.deploy.cluster_file import ClusterEndpoint
from runtime.deploy.remote import RestExecutor
from runtime.graph.job_graph import JobGraph
from runtime.rest.client import RestClusterClient, RestError
from tests.integration.rest.conftest import TOKEN, RestCluster
from tests.waiting import wait_until


def _raw(url: str, method: str = "GET", token: str | None = TOKEN, body: bytes | None = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True)


def _state(client: RestClusterClient, job_id: str) -> str:
    return _dump(client.job_details(job_id))["state"]


def _slowly(i: int) -> int:
    time.sleep(0.01)
    return i


def _slow_job(records: int = 100_000, parallelism: int = 2) -> JobGraph:
    """Runs for minutes unless cancelled: the source makes 100 records/s per subtask, in batches of 10."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    numbers = env.from_source(DataGeneratorSource(_slowly, records, batch_size=10), WatermarkStrategy.no_watermarks(), "numbers")
    # rebalance: two vertices, so records cross the network and show in the vertices' IO metrics
    numbers.rebalance().map(lambda x: x + 1).name("map").print()
    return env.get_job_graph("slow job")


def _cancel_and_wait(client: RestClusterClient, job_id: str) -> None:
    client.cancel_job(job_id)
    wait_until(lambda: _state(client, job_id) == "CANCELED", timeout=30, what="CANCELED")


# --- authentication ------------------------------------------------------------------------------
def test_every_request_needs_the_cluster_token(rest_cluster: RestCluster) -> None:
    for path in ("/overview", "/jobs", "/jobs/overview", "/taskmanagers", "/cluster"):
        assert _raw(rest_cluster.url + path, token=None)[0] == 401, path
        status, body = _raw(rest_cluster.url + path, token="not-the-token")
        assert status == 401 and "cluster token" in body["errors"][0], path
    status, _ = _raw(rest_cluster.url + "/jobs", method="POST", token=None, body=b"{}")
    assert status == 401
    with pytest.raises(RestError) as info:
        rest_cluster.client(token="wrong").list_jobs()
    assert info.value.status == 401
    # liveness and the OpenAPI document are public
    assert _raw(rest_cluster.url + "/healthz", token=None) == (200, {"status": "ok"})
    status, doc = _raw(rest_cluster.url + "/openapi.json", token=None)
    assert status == 200 and "/jobs/{jobid}" in doc["paths"]


# --- a real program ------------------------------------------------------------------------------
def test_a_program_submitted_over_rest_finishes_with_correct_results(rest_cluster: RestCluster) -> None:
    records = [(i % 7, i) for i in range(2_000)]
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    stream = env.from_collection(records).key_by(lambda r: r[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))
    endpoint = ClusterEndpoint(url=rest_cluster.url, token=TOKEN, pid=0)
    with use_executor(RestExecutor(endpoint)):
        got = list(stream.execute_and_collect("rest-reduce"))
    # the running sums per key, in any interleaving of keys: compare the final sum per key and the multiset
    expected: list[tuple[int, int]] = []
    totals: dict[int, int] = {}
    for k, v in records:
        totals[k] = totals.get(k, 0) + v
        expected.append((k, totals[k]))
    assert Counter(got) == Counter(expected)
    client = rest_cluster.client()
    job = next(j for j in client.list_jobs() if j.name == "rest-reduce")
    assert job.state == "FINISHED" and job.end_time >= job.start_time > 0
    d = _dump(client.job_details(job.jid))
    assert d["state"] == "FINISHED" and d["end-time"] > 0
    assert all(st["status"] == "FINISHED" and st["taskmanager-id"] for v in d["vertices"] for st in v["subtasks"])
    source = d["vertices"][0]
    assert source["metrics"]["write-records"] == len(records) and source["metrics"]["write-bytes"] > 0
    consumer = d["vertices"][1]
    assert consumer["metrics"]["read-records"] == len(records) and consumer["metrics"]["read-bytes"] > 0
    result = client.job_result(job.jid)
    assert result.status.value == "FINISHED" and result.error is None
    statuses = [s for s, _, _ in client.job_history(job.jid)]
    assert statuses[0] == "CREATED" and statuses[-1] == "FINISHED" and "RUNNING" in statuses


# --- a running job ---------------------------------------------------------------------------------
def test_running_job_is_listed_with_every_subtask_placed_and_records_growing(rest_cluster: RestCluster) -> None:
    client = rest_cluster.client()
    job_id = client.submit_job(_slow_job())
    try:
        def all_running() -> dict[str, Any] | None:
            d = _dump(client.job_details(job_id))
            subtasks = [st for v in d["vertices"] for st in v["subtasks"]]
            return d if subtasks and all(st["status"] == "RUNNING" for st in subtasks) else None

        d = wait_until(all_running, what="every subtask RUNNING")
        assert d["state"] == "RUNNING" and d["end-time"] == -1
        for v in d["vertices"]:
            assert v["status"] == "RUNNING" and v["tasks"]["RUNNING"] == v["parallelism"] == len(v["subtasks"])
            for st in v["subtasks"]:
                assert st["taskmanager-id"].startswith("tm-") and st["host"] and st["attempt"] == 0 and st["attempt-id"]
        tm_ids = {t.id for t in client.task_managers()}
        assert {st["taskmanager-id"] for v in d["vertices"] for st in v["subtasks"]} <= tm_ids

        def map_records() -> int:
            return _dump(client.job_details(job_id))["vertices"][-1]["metrics"]["read-records"]

        first = wait_until(map_records, what="records arriving")
        wait_until(lambda: map_records() > first, timeout=20, what="records growing")
        assert any(j.jid == job_id and j.state == "RUNNING" and j.end_time == -1 for j in client.list_jobs())
        overview = _dump(client.overview())
        assert overview["jobs-running"] >= 1 and overview["slots-total"] - overview["slots-available"] >= 2
        assert overview["taskmanagers"] == len(tm_ids)
        ids = _raw(rest_cluster.url + "/jobs")[1]["jobs"]
        assert {"id": job_id, "status": "RUNNING"} in ids
    finally:
        _cancel_and_wait(client, job_id)
    d = _dump(client.job_details(job_id))
    # every subtask ended (a consumer may see its producer's partition go before its own cancel: FAILED)
    assert all(st["status"] in ("CANCELED", "FAILED") and st["end-time"] > 0 for v in d["vertices"] for st in v["subtasks"])
    assert [s for s, _, _ in client.job_history(job_id)][-2:] == ["CANCELLING", "CANCELED"]
    with pytest.raises(RestError) as again:
        client.cancel_job(job_id)
    assert again.value.status == 409 and "already ended CANCELED" in again.value.message


def _wide(i: np.ndarray) -> dict[str, np.ndarray]:
    return {"a": i, "b": i * 2}


def _slow_batch(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    time.sleep(0.05)
    return batch


def test_backpressure_is_high_for_a_producer_feeding_a_slow_consumer(rest_cluster: RestCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    src = DataGeneratorSource(None, 10_000 * 2_000, batch_generator=_wide, batch_size=10_000)
    (
        env.from_source(src, WatermarkStrategy.no_watermarks(), "fast source")
        .rebalance()
        .map_batches(_slow_batch)
        .slot_sharing_group("consumer")  # its own slot: the exchange crosses TaskManagers
        .name("slow consumer")
        .print()
    )
    client = rest_cluster.client()
    job_id = client.submit_job(env.get_job_graph("backpressured"))
    try:
        def levels() -> dict[str, Any] | None:
            d = _dump(client.job_details(job_id))
            by_name = {v["name"]: v for v in d["vertices"]}
            source = by_name["Source: fast source"] if "Source: fast source" in by_name else d["vertices"][0]
            return d if source["backpressure-level"] == "high" else None

        d = wait_until(levels, timeout=30, what="backpressure level high at the source")
        source, consumer = d["vertices"][0], d["vertices"][1]
        st = source["subtasks"][0]
        assert st["backpressure-ratio"] > 0.5 and st["metrics"]["accumulated-backpressured-time"] > 0
        # the slow consumer itself is busy, not blocked on its output
        assert consumer["backpressure-level"] == "ok"
    finally:
        _cancel_and_wait(client, job_id)


# --- bad input -------------------------------------------------------------------------------------
def test_unknown_ids_are_404_naming_them(rest_cluster: RestCluster) -> None:
    client = rest_cluster.client()
    for call in (client.job_details, client.job_result, client.cancel_job, client.job_history, client.job_exceptions):
        with pytest.raises(RestError) as info:
            call("f" * 32)
        assert info.value.status == 404 and "f" * 32 in info.value.message, call
    with pytest.raises(RestError) as info:
        client.coordination_request("f" * 32, 3, b"x")
    assert info.value.status == 404
    with pytest.raises(RestError) as info:
        client.task_manager("tm-nope")
    assert info.value.status == 404 and "tm-nope" in info.value.message
    with pytest.raises(RestError) as info:
        client.task_manager_stdout("tm-nope")
    assert info.value.status == 404 and "tm-nope" in info.value.message


def test_what_tasks_print_is_in_their_task_managers_stdout(rest_cluster: RestCluster) -> None:
    """Flink: /taskmanagers/:id/stdout; a print sink's records and user code's print() calls."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)

    def shout(i: int) -> int:
        if i % 100 == 0:
            print(f"user code saw {i}")
        return i

    env.from_collection(list(range(1000))).rebalance().map(shout).print("out")
    client = rest_cluster.client()
    job_id = client.submit_job(env.get_job_graph("printing"))
    wait_until(lambda: _state(client, job_id) == "FINISHED", timeout=60)
    tms = {st["taskmanager-id"] for v in _dump(client.job_details(job_id))["vertices"] for st in v["subtasks"]}
    printed = "".join(client.task_manager_stdout(tm) for tm in tms).splitlines()
    # the cluster may have run other jobs' tasks on these TaskManagers: only this job's lines count
    records = sorted(int(line.split("> ", 1)[1]) for line in printed if line.startswith(("out:1> ", "out:2> ")))
    assert records == list(range(1000))
    assert sorted(line for line in printed if line.startswith("user code saw")) == sorted(f"user code saw {i}" for i in range(0, 1000, 100))


def test_malformed_and_invalid_job_graphs_are_400_with_the_reason(rest_cluster: RestCluster) -> None:
    url = rest_cluster.url + "/jobs"
    status, body = _raw(url, "POST", body=b'{"job_name": "x", "vertices": [')
    assert status == 400 and "not valid JSON" in body["errors"][0]
    status, body = _raw(url, "POST", body=b'{"job_name": 5}')
    assert status == 400 and "job_name" in body["errors"][0]
    graph = json.loads(_slow_job().model_dump_json())
    graph["vertices"][-1]["inputs"][0]["source_vertex_id"] = "no-such-vertex"
    status, body = _raw(url, "POST", body=json.dumps(graph).encode())
    assert status == 400 and "unknown vertex 'no-such-vertex'" in body["errors"][0]
    empty = dict(graph, vertices=[])
    status, body = _raw(url, "POST", body=json.dumps(empty).encode())
    assert status == 400 and "no vertices" in body["errors"][0]


def test_a_job_needing_more_slots_than_the_cluster_can_offer_is_400(rest_cluster: RestCluster) -> None:
    with pytest.raises(RestError) as info:
        rest_cluster.client().submit_job(_slow_job(parallelism=5))
    assert info.value.status == 400 and "5" in info.value.message, info.value.message


def test_a_duplicate_job_id_is_400(rest_cluster: RestCluster) -> None:
    client = rest_cluster.client()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3]).print()
    graph = env.get_job_graph("twice")
    job_id = client.submit_job(graph)
    with pytest.raises(RestError) as info:
        client.submit_job(graph)
    assert info.value.status == 400 and "already submitted" in info.value.message
    wait_until(lambda: client.job_result(job_id).status.is_globally_terminal, what="job end")


def test_garbage_user_code_fails_the_job_not_the_server(rest_cluster: RestCluster) -> None:
    client = rest_cluster.client()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3]).map(lambda x: x).print()
    graph = json.loads(env.get_job_graph("garbage").model_dump_json())
    graph["vertices"][0]["operators"][0]["operator_factory"] = "Z2FyYmFnZQ=="  # base64 of b"garbage"
    status, body = _raw(rest_cluster.url + "/jobs", "POST", body=json.dumps(graph).encode())
    assert status == 202, body
    job_id = body["jobid"]
    result = wait_until(lambda: (r := client.job_result(job_id)).status.is_globally_terminal and r, what="job end")
    assert result.status.value == "FAILED" and result.error is not None
    exc = _dump(client.job_exceptions(job_id))
    assert "could not instantiate operator" in exc["root-exception"] and "UnpicklingError" in exc["root-exception"]
    entry = exc["exceptionHistory"]["entries"][0]
    assert entry["taskManagerId"].startswith("tm-") and "Traceback" in entry["stacktrace"]
    d = _dump(client.job_details(job_id))
    assert d["state"] == "FAILED" and d["root-exception"]["exceptionName"] == "InvalidProgramError"
