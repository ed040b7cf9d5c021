"""REST and CLI for elastic scaling: GET/PUT /jobs/{id}/resource-requirements rescales an adaptive
job (bad requests get 400 in the API's {"errors": [...]} shape), PUT /cluster/taskmanagers scales
the cluster, and job details / `millrace info` show the scheduler, its state and the rescales."""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.jobs import windowed_sum
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.cli import format_job_info
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniClusterConfig
from tests.integration.rest.conftest import TOKEN, RestCluster, start_rest_cluster
from tests.integration.runtime.test_batch import read_windowed_sum
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ADAPTIVE = {
    "jobmanager.scheduler": "adaptive",
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "500 ms",
    "jobmanager.adaptive-scheduler.scaling-interval.min": "0 ms",
}


@pytest.fixture(scope="module")
def elastic() -> Iterator[RestCluster]:
    yield from start_rest_cluster(MiniClusterConfig(
        provider="local", initial_task_managers=2, min_task_managers=2, max_task_managers=3, slots_per_tm=1,
        heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"),
    ))


def call(rc: RestCluster, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(rc.url + path, data=data, method=method, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def test_put_resource_requirements_rescales_the_job_and_bad_requests_get_400(elastic: RestCluster, tmp_path: Path) -> None:
    rc, client = elastic, elastic.client()
    n, out = 60_000, str(tmp_path / "out")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    windowed_sum.build(env, n, out, rate=6_000, checkpoint_interval_ms=300)
    graph = env.get_job_graph("elastic windowed_sum")
    job_id = client.submit_job(graph.model_copy(update={"config": {**graph.config, **ADAPTIVE}}))

    def at(p: int) -> bool:
        d = client.job_details(job_id)
        return d.scheduler_state == "Executing" and all(v.parallelism == p and v.tasks.get("RUNNING") == p for v in d.vertices)

    wait_until(lambda: at(2), timeout=60, what="the job at p=2", interval=0.1)
    status, body = call(rc, "GET", f"/jobs/{job_id}/resource-requirements")
    assert status == 200 and {v["parallelism"]["upperBound"] for v in body.values()} == {2}
    vertex = next(iter(body))
    for bad, why in [
        ({vertex: {"parallelism": {"lowerBound": 3, "upperBound": 2}}}, "lower bound 3 is above upper bound 2"),
        ({vertex: {"parallelism": {"lowerBound": 1, "upperBound": 129}}}, "above its max parallelism 128"),
        ({"no-such-vertex": {"parallelism": {"lowerBound": 1, "upperBound": 1}}}, "unknown vertex 'no-such-vertex'"),
        ({vertex: {"parallelism": {"lowerBound": 0, "upperBound": 1}}}, "lowerBound"),
    ]:
        status, err = call(rc, "PUT", f"/jobs/{job_id}/resource-requirements", bad)
        assert status == 400 and any(why in e for e in err["errors"]), (bad, status, err)
    client.update_resource_requirements(job_id, {v: (1, 1) for v in body})
    wait_until(lambda: at(1), timeout=60, what="the job at p=1 after the PUT", interval=0.1)

    d = client.job_details(job_id)
    text = format_job_info(d)
    assert "Scheduler: adaptive, Executing" in text and "resource requirements changed" in text, text
    assert d.rescales[0].cause == "resource requirements changed"
    wait_until(lambda: client.job_result(job_id).status.is_globally_terminal, timeout=120, what="the job's end")
    assert client.job_result(job_id).status is JobStatus.FINISHED
    assert read_windowed_sum(out) == windowed_sum.reference(n)


def test_the_default_scheduler_refuses_new_requirements_with_409_and_the_cluster_scales(elastic: RestCluster, tmp_path: Path) -> None:
    rc, client = elastic, elastic.client()
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    windowed_sum.build(env, 10_000_000, str(tmp_path / "out"), rate=1_000)
    job_id = client.submit_job(env.get_job_graph("fixed"))
    wait_until(lambda: client.job_details(job_id).state == JobStatus.RUNNING.value, timeout=60, what="the job running")
    body = call(rc, "GET", f"/jobs/{job_id}/resource-requirements")[1]
    status, err = call(rc, "PUT", f"/jobs/{job_id}/resource-requirements", {v: {"parallelism": {"lowerBound": 1, "upperBound": 2}} for v in body})
    assert status == 409 and "jobmanager.scheduler: adaptive" in err["errors"][0]
    client.cancel_job(job_id)

    assert call(rc, "PUT", "/cluster/taskmanagers", {"taskmanagers": 3})[0] == 200
    wait_until(lambda: len(client.task_managers()) == 3, timeout=60, what="a third TaskManager")
    assert call(rc, "PUT", "/cluster/taskmanagers", {"taskmanagers": 2})[0] == 200
    wait_until(lambda: len(client.task_managers()) == 2, timeout=60, what="back to two TaskManagers")
    status, err = call(rc, "PUT", "/cluster/taskmanagers", {"taskmanagers": -1})
    assert status == 400 and err["errors"]
    status, err = call(rc, "PUT", "/cluster/taskmanagers", {"taskmanagers": 9999})  # above the cluster's max: refused, nothing started
    assert status == 400 and "this cluster runs at most" in err["errors"][0], err
    assert len(client.task_managers()) == 2
