"""The adaptive scheduler on a MiniCluster with local-process TaskManagers: a job runs at the slots it
gets, scales up when TaskManagers are added, down when one is SIGKILLed, follows new resource
requirements, and its Delta output equals the plain-Python reference row for row throughout."""
from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.jobs import windowed_sum
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import JobExecutionError
from runtime.core.states import ExecutionState, JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m
from tests.integration.runtime.test_batch import read_windowed_sum
from tests.waiting import job_details, wait_until

pytestmark = pytest.mark.integration

ADAPTIVE = {
    "jobmanager.scheduler": "adaptive",
    "jobmanager.adaptive-scheduler.resource-stabilization-timeout": "1 s",
    "jobmanager.adaptive-scheduler.scaling-interval.min": "0 ms",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "5",
    "restart-strategy.fixed-delay.delay": "200 ms",
}


@pytest.fixture
def two_task_managers() -> Iterator[MiniCluster]:
    """Two one-slot TaskManagers, pinned there (the cluster may run 4: a test scales it up)."""
    config = MiniClusterConfig(
        provider="local", initial_task_managers=2, min_task_managers=2, max_task_managers=4, slots_per_tm=1,
        heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"),
    )
    cluster = MiniCluster(config).start()
    try:
        assert cluster.resource_manager_gateway().call_sync("set_task_manager_count", m.TaskManagerCount(task_managers=2), timeout=10).ok
        cluster.wait_for_task_managers(2, timeout=60)
        yield cluster
    finally:
        cluster.close()


def running_at(cluster: MiniCluster, job_id: str, parallelism: int) -> m.JobDetailsMessage | None:
    """The job's details once it is Executing at `parallelism` with every subtask RUNNING."""
    d = job_details(cluster, job_id)
    subtasks = [s for v in d.vertices for s in v.subtasks]
    ok = (d.scheduler_state == "Executing" and all(v.parallelism == parallelism for v in d.vertices)
          and subtasks and all(s.state is ExecutionState.RUNNING for s in subtasks))
    return d if ok else None


def submit_adaptive(cluster: MiniCluster, name: str, parallelism: int, n: int, out: str, rate: int) -> Any:
    """The checkpointed, throttled main job under the adaptive scheduler; its client."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    windowed_sum.build(env, n, out, rate=rate, checkpoint_interval_ms=300)
    graph = env.get_job_graph(name)
    return cluster.submit(graph.model_copy(update={"config": {**graph.config, **ADAPTIVE}}))


def test_adaptive_runs_on_the_slots_it_has_scales_up_and_down_and_stays_exactly_once(two_task_managers: MiniCluster, tmp_path: Path) -> None:
    cluster = two_task_managers
    n, out = 150_000, str(tmp_path / "out")
    client = submit_adaptive(cluster, "adaptive windowed_sum", 4, n, out, rate=8_000)
    wait_until(lambda: running_at(cluster, client.job_id, 2), timeout=60, what="the job at p=2 on 2 slots", interval=0.1)

    # two more TaskManagers: the job scales to its configured 4
    ack = cluster.resource_manager_gateway().call_sync("set_task_manager_count", m.TaskManagerCount(task_managers=4), timeout=10)
    assert ack.ok
    wait_until(lambda: running_at(cluster, client.job_id, 4), timeout=90, what="the job at p=4 after two TaskManagers joined", interval=0.1)

    # SIGKILL one: the job goes on at 3 instead of waiting for a replacement
    victim = cluster.wait_for_task_managers(4, timeout=30)[-1]
    os.kill(victim.pid, signal.SIGKILL)
    wait_until(lambda: any(sum(r.to_parallelism.values()) < sum(r.from_parallelism.values())
                           for r in job_details(cluster, client.job_id).rescales),
               timeout=60, what="a rescale down after the TaskManager was killed", interval=0.1)

    result = client.get_job_execution_result(timeout=240)
    assert result.status is JobStatus.FINISHED
    details = job_details(cluster, client.job_id)
    steps = [(sum(r.from_parallelism.values()), sum(r.to_parallelism.values())) for r in details.rescales]
    # from 2 vertices at 2 up to both at 4 (one step per TaskManager as each registers), then down after the kill
    assert steps[0][0] == 4 and max(after for _, after in steps) == 8, steps
    assert any(after < before for before, after in steps), steps
    # each rescale's downtime is known once its execution ran (one superseded while deploying has none)
    assert details.rescales[-1].downtime_ms is not None and all(r.downtime_ms < 30_000 for r in details.rescales if r.downtime_ms is not None)
    # exactly once through every rescale and the kill: no (user, window) missing, duplicated or wrong
    assert read_windowed_sum(out) == windowed_sum.reference(n)


def test_new_resource_requirements_rescale_a_running_job_and_bad_ones_are_refused(two_task_managers: MiniCluster, tmp_path: Path) -> None:
    cluster = two_task_managers
    n, out = 60_000, str(tmp_path / "out")
    client = submit_adaptive(cluster, "rescaled windowed_sum", 2, n, out, rate=6_000)
    wait_until(lambda: running_at(cluster, client.job_id, 2), timeout=60, what="the job at p=2", interval=0.1)
    dispatcher = cluster.dispatcher_gateway()
    current = dispatcher.call_sync("request_job_resource_requirements", m.JobIdMessage(job_id=client.job_id), timeout=10)
    assert current.scheduler == "adaptive" and {b.upper_bound for b in current.requirements.values()} == {2}
    bad = dispatcher.call_sync("update_job_resource_requirements", m.JobResourceRequirements(
        job_id=client.job_id, requirements={"no-such-vertex": m.VertexParallelismBounds(upper_bound=1)}), timeout=10)
    assert not bad.ok and "unknown vertex 'no-such-vertex'" in bad.message
    one = {v: m.VertexParallelismBounds(lower_bound=1, upper_bound=1) for v in current.requirements}
    assert dispatcher.call_sync("update_job_resource_requirements", m.JobResourceRequirements(job_id=client.job_id, requirements=one), timeout=10).ok
    wait_until(lambda: running_at(cluster, client.job_id, 1), timeout=60, what="the job at p=1 after its requirements changed", interval=0.1)
    assert client.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert job_details(cluster, client.job_id).rescales[0].cause == "resource requirements changed"
    assert read_windowed_sum(out) == windowed_sum.reference(n)


def test_a_job_that_never_gets_its_minimum_fails_after_the_resource_wait_timeout(two_task_managers: MiniCluster, tmp_path: Path) -> None:
    cluster = two_task_managers
    # a default-scheduled job holds both slots
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    windowed_sum.build(env, 10_000_000, str(tmp_path / "hog"), rate=1_000)
    hog = cluster.submit(env.get_job_graph("slot hog"))
    wait_until(lambda: all(s.state is ExecutionState.RUNNING for v in job_details(cluster, hog.job_id).vertices for s in v.subtasks)
               and job_details(cluster, hog.job_id).vertices, timeout=60, what="the hog running", interval=0.1)
    env2 = StreamExecutionEnvironment.get_execution_environment()
    env2.set_parallelism(2)
    windowed_sum.build(env2, 1000, str(tmp_path / "starved"))
    graph = env2.get_job_graph("starved")
    graph = graph.model_copy(update={"config": {**graph.config, **ADAPTIVE, "jobmanager.adaptive-scheduler.resource-wait-timeout": "2 s"}})
    starved = cluster.submit(graph)
    with pytest.raises(JobExecutionError) as info:
        starved.get_job_execution_result(timeout=60)
    text = str(info.value)
    assert "resource-wait-timeout" in text and "needs 1 slot(s) and has 0" in text, text
    hog.cancel()
