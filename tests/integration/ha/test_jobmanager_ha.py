"""JobManager high availability against a real ZooKeeper: two JobManager processes of one cluster
(local TaskManagers), a leader and a standby; the leader paused past its session timeout (split
brain), both JobManagers SIGKILLed, ZooKeeper lost and back, or a node of an ensemble lost (the
leader SIGKILLed with TaskManagers on Spark: tests/e2e/test_ha_on_spark.py); jobs that ended are never run again; a
corrupt job graph store entry fails only its job; an unreachable ZooKeeper fails the start.

Every output is the main job's Delta table, checked row for row against the plain-Python reference.
One ZooKeeper serves the module (each test has a cluster id of its own)."""
from __future__ import annotations

import importlib.util
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.deploy.cluster_entrypoint import ClusterConfig
from runtime.deploy.cluster_process import ClusterStartError, start_cluster_process
from runtime.deploy.remote import rest_client
from runtime.deploy.zookeeper_server import ZooKeeperEnsemble, ZooKeeperServer, free_ports
from runtime.rest.client import RestClusterClient, RestError
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT_MS = 3_000


def _benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("millrace_ha_failover", ROOT / "benchmarks" / "ha_failover.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _benchmark()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")) as server:
        yield server


@pytest.fixture
def ha_cluster(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Any]:
    """Two JobManagers (leader and standby) of a fresh cluster id; every process stopped after."""
    cluster = bench.HaCluster(tmp_path, zookeeper.connect_string, "local", SESSION_TIMEOUT_MS, slots=2)
    try:
        cluster.first, _ = cluster.start_job_managers(2)
        yield cluster
    finally:
        cluster.close()


def _main_job(tmp_path: Path, events: int, rate: int, name: str = "windowed_sum-ha", parallelism: int = 2) -> Any:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    windowed_sum.build(env, events, str(tmp_path / name), rate=rate, checkpoint_interval_ms=300)
    return env.get_job_graph(name)


def _own_view(endpoint: Any) -> RestClusterClient:
    """A client of exactly this JobManager (no leader following)."""
    return RestClusterClient(endpoint.url, endpoint.token, timeout=10)


def _role(endpoint: Any) -> str | None:
    try:
        ha = _own_view(endpoint).cluster_info().high_availability
    except RestError:
        return None
    return None if ha is None else ha.role


def _name(state: Any) -> str:
    """A REST state (an enum member or its value)."""
    return str(getattr(state, "value", state))


def _running_with_a_checkpoint(client: RestClusterClient, job_id: str) -> bool:
    return client.job_details(job_id).state == "RUNNING" and client.job_checkpoints(job_id).counts.completed >= 1


def test_a_paused_leader_steps_down_and_commits_nothing_split_brain(ha_cluster: Any, tmp_path: Path) -> None:
    client = rest_client(ha_cluster.first)
    events = 45_000
    job_id = client.submit_job(_main_job(tmp_path, events, rate=5_000))
    wait_until(lambda: _running_with_a_checkpoint(client, job_id), timeout=60, what="the job runs and checkpointed")
    old = ha_cluster.leader()
    standby = next(e for _, e in ha_cluster.processes.values() if e.pid != old.pid)
    os.kill(old.pid, signal.SIGSTOP)  # the JobManager process only: its TaskManagers run on
    try:
        # past the session timeout ZooKeeper expires the paused leader's session; the standby leads
        # and runs the job again from its latest checkpoint
        wait_until(lambda: _role(standby) == "leader", timeout=60, what="the standby leads")
        wait_until(lambda: _own_view(standby).job_details(job_id).state == "RUNNING", timeout=60, what="the job runs under the new leader")
    finally:
        os.kill(old.pid, signal.SIGCONT)
    # the old leader wakes up, learns its session expired, suspends its job without committing
    wait_until(lambda: _role(old) == "standby", timeout=30, what="the resumed old leader stands by")

    def refers_to_the_new_leader() -> bool:  # once its ZooKeeper client reconnected in a new session
        try:
            _own_view(old).job_details(job_id)
        except RestError as e:
            assert e.status == 503, e
            return standby.url in e.message
        raise AssertionError("the old leader still answers for the job")

    wait_until(refers_to_the_new_leader, timeout=30, what="the old leader names the new one")
    result = bench._await_result(client, job_id, timeout_s=300)
    assert result.status.value == "FINISHED"
    check = bench.check_windowed_sum(str(tmp_path / "windowed_sum-ha"), events)
    assert check["duplicate_keys"] == 0 and check["missing_keys"] == 0 and check["wrong_values"] == 0 and check["verified"], check
    old_log = Path(old.log or "").read_text()
    assert "lost the leadership" in old_log and "suspending the job" in old_log


def test_ended_jobs_are_not_run_again_after_a_failover(ha_cluster: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    client = rest_client(ha_cluster.first)
    finished = client.submit_job(_main_job(tmp_path, 4_000, rate=0, name="finished"))
    assert bench._await_result(client, finished, timeout_s=120).status.value == "FINISHED"
    cancelled = client.submit_job(_main_job(tmp_path, 10_000_000, rate=2_000, name="cancelled"))
    # it committed output (a checkpoint completed, its sink committed) before it is cancelled
    wait_until(lambda: (tmp_path / "cancelled" / "_delta_log").is_dir(), timeout=60, what="the second job committed output")
    client.cancel_job(cancelled)
    assert bench._await_result(client, cancelled, timeout_s=60).status.value == "CANCELED"
    versions = {name: DeltaTable(str(tmp_path / name)).version() for name in ("finished", "cancelled")}
    ha_cluster.kill(ha_cluster.leader())
    new = ha_cluster.leader()
    # the new leader knows both ended (the job result store), and runs neither
    assert client.job_result(finished).status.value == "FINISHED"
    assert client.job_result(cancelled).status.value == "CANCELED"
    assert client.url == new.url.rstrip("/")
    assert [j for j in _own_view(new).list_jobs() if j.state not in ("FINISHED", "CANCELED", "FAILED")] == []
    with pytest.raises(RestError, match="already ran"):
        client.submit_job(_main_job(tmp_path, 4_000, rate=0, name="finished").model_copy(update={"job_id": finished}))
    assert {name: DeltaTable(str(tmp_path / name)).version() for name in ("finished", "cancelled")} == versions


def test_both_job_managers_killed_one_started_later_recovers_the_jobs_and_a_corrupt_entry_fails_only_its_job(
    ha_cluster: Any, tmp_path: Path,
) -> None:
    client = rest_client(ha_cluster.first)
    # one slot each: the cluster's two slots hold both
    healthy = client.submit_job(_main_job(tmp_path, 40_000, rate=4_000, name="healthy", parallelism=1))
    broken = client.submit_job(_main_job(tmp_path, 10_000_000, rate=1_000, name="broken", parallelism=1))
    wait_until(lambda: all(_running_with_a_checkpoint(client, j) for j in (healthy, broken)), timeout=60, what="both jobs run")
    for _, endpoint in list(ha_cluster.processes.values()):  # nothing of the cluster runs any more
        ha_cluster.kill(endpoint)
    graphs = list((tmp_path / "ha").rglob(f"{broken}*.json"))
    assert len(graphs) == 1, graphs
    graphs[0].write_text(graphs[0].read_text()[:100])  # the broken job's entry in the job graph store is damaged
    ha_cluster.start_job_manager()  # later: the jobs are in Delta only
    result = bench._await_result(client, broken, timeout_s=120)
    assert result.status.value == "FAILED" and result.error is not None
    assert broken in result.error.message and "cannot be read" in result.error.message
    assert bench._await_result(client, healthy, timeout_s=300).status.value == "FINISHED"
    check = bench.check_windowed_sum(str(tmp_path / "healthy"), 40_000)
    assert check["verified"], check


def test_an_ensemble_that_loses_a_node_leaves_the_jobs_untouched(tmp_path: Path) -> None:
    with ZooKeeperEnsemble(tmp_path / "zk", size=3) as ensemble:
        # the default session timeout: the ensemble elects a new leader and the JobManagers reconnect
        # within it (with 3 s, a reconnect after the re-election now and then outlasted the session)
        cluster = bench.HaCluster(tmp_path, ensemble.connect_string, "local", 10_000, slots=2)
        try:
            first, _ = cluster.start_job_managers(2)
            client = rest_client(first)
            events = 30_000
            job_id = client.submit_job(_main_job(tmp_path, events, rate=5_000))
            wait_until(lambda: _running_with_a_checkpoint(client, job_id), timeout=60, what="the job runs and checkpointed")
            leader = cluster.leader()
            # the ZooKeeper leader goes: the JobManagers' clients reconnect to the other two in their session
            victim = ensemble.leader()
            assert victim is not None
            victim.kill()
            result = bench._await_result(client, job_id, timeout_s=300)
            assert result.status.value == "FINISHED"
            assert cluster.leader().pid == leader.pid, "the JobManager leader did not change"
            history = [s for s, *_ in client.job_history(job_id)]
            assert "SUSPENDED" not in history and "RESTARTING" not in history, history
            assert client.job_exceptions(job_id).restarts == 0
            check = bench.check_windowed_sum(str(tmp_path / "windowed_sum-ha"), events)
            assert check["verified"], check
        finally:
            cluster.close()


def test_an_unreachable_zookeeper_fails_the_start_naming_the_quorum(tmp_path: Path) -> None:
    quorum = f"127.0.0.1:{free_ports(1)[0]}"  # nothing listens there
    cfg = ClusterConfig(
        mode="session", home=str(tmp_path / "jm"), provider="local", task_managers=0,
        high_availability={"type": "zookeeper", "quorum": quorum, "connection_timeout_ms": 2_000, "storage_dir": str(tmp_path / "ha")},
    )
    started = time.monotonic()
    with pytest.raises(ClusterStartError, match=quorum.replace(".", r"\.")):
        start_cluster_process(cfg, timeout_s=60)
    assert time.monotonic() - started < 30


def test_a_batch_job_keeps_its_committed_stage_when_the_leader_is_killed(ha_cluster: Any, tmp_path: Path) -> None:
    """The leader is SIGKILLed after the producer stage committed its blocking results (Delta) and
    while the consumer stage runs: the new leader runs the consumers and no producer again."""
    from tests.integration.runtime.test_batch_recovery import build_job, output, producer_runs, reference

    n = 20_000
    client = rest_client(ha_cluster.first)
    job_id = client.submit_job(build_job(tmp_path, n))

    def consumers_running() -> bool:
        producers, consumers = client.job_details(job_id).vertices
        return all(_name(s.status) == "FINISHED" for s in producers.subtasks) and all(_name(s.status) == "RUNNING" for s in consumers.subtasks)

    wait_until(consumers_running, timeout=60, what="the producers committed and the consumers run")
    ha_cluster.kill(ha_cluster.leader())
    (tmp_path / "marks" / "release").touch()  # the consumers may finish once they run again
    result = bench._await_result(client, job_id, timeout_s=180)
    assert result.status.value == "FINISHED", result.error
    assert output(tmp_path) == reference(n)
    assert producer_runs(tmp_path) == [1, 1], "a producer whose results were committed ran again"
    producers, consumers = client.job_details(job_id).vertices  # through the new leader
    assert [(_name(s.status), s.attempt, s.taskmanager_id) for s in producers.subtasks] == [("FINISHED", 0, None)] * 2
    assert all(_name(s.status) == "FINISHED" and s.taskmanager_id for s in consumers.subtasks)


def _cli(*args: str, cwd: Path) -> str:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "runtime.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=180,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, f"millrace {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_the_cli_and_the_dagster_resource_follow_the_leader_through_a_failover(ha_cluster: Any, tmp_path: Path) -> None:
    """Pointed once at the first JobManager's cluster file, the CLI and MillraceClusterResource submit,
    list, savepoint and stop through a failover: the cluster file names ZooKeeper, where the leader is."""
    import re

    from dagster import DagsterInstance, SkipReason, build_sensor_context

    from pipelines.jobs.running_totals import live_job_name
    from pipelines.live import millrace_restore_sensor
    from resources.millrace import MillraceClusterResource
    from resources.spark import SparkResource
    from resources.warehouse import DeltaWarehouseResource

    home = str(Path(ha_cluster.first.log or "").parent)  # jm-1: its cluster.json stays after it is killed
    checkpoints = f"state.checkpoints.dir={tmp_path / 'checkpoints'}"
    out = _cli("run", "--cluster", home, "--detached", "-D", checkpoints, str(ROOT / "pipelines" / "jobs" / "windowed_sum.py"),
               "--events", "100000000", "--rate", "1000", "--checkpoint-interval-ms", "300", "--output", str(tmp_path / "cli-job"),
               "-p", "1", cwd=tmp_path)
    match = re.search(r"JobID ([0-9a-f]{32})", out)
    assert match, out
    cli_job = match.group(1)
    session = MillraceClusterResource(mode="session", cluster_file=home, spark=SparkResource())
    rest = session.rest()
    # a live job as the Dagster pipeline names it (the restore sensor restarts such a job when it FAILED)
    live = rest.submit_job(_main_job(tmp_path, 100_000_000, rate=500, name=live_job_name("2026-01-01"), parallelism=1))
    wait_until(lambda: _running_with_a_checkpoint(rest, cli_job), timeout=60, what="the CLI's job runs and checkpointed")
    old = ha_cluster.leader()
    ha_cluster.kill(old)
    # the new leader recovered the live job: the restore sensor sees it running and starts no second copy
    resources = {"millrace_session": session, "warehouse": DeltaWarehouseResource(base_path=str(tmp_path / "warehouse"))}
    with build_sensor_context(instance=DagsterInstance.ephemeral(), resources=resources) as ctx:
        verdict = millrace_restore_sensor(ctx)
    assert isinstance(verdict, SkipReason) and "is running" in (verdict.skip_message or ""), verdict
    rest.cancel_job(live)
    # the Dagster resource submits through the failover (the first JobManager may be the dead one)
    submitted = session.submit(_main_job(tmp_path, 100_000_000, rate=1_000, name="dagster-job", parallelism=1), detached=True)
    listed = {j["jid"]: j["state"] for j in session.list_jobs()}
    assert listed.get(cli_job) == "RUNNING" and submitted.job_id in listed, listed
    assert cli_job in _cli("list", "--cluster", home, cwd=tmp_path)
    new = ha_cluster.leader()
    status = _cli("cluster", "status", "--home", str(Path(new.log or "").parent), cwd=tmp_path)
    assert "high availability: this JobManager is the leader" in status and new.url in status and "CONNECTED" in status, status
    wait_until(lambda: all(_running_with_a_checkpoint(rest, j) for j in (cli_job, submitted.job_id)), timeout=60, what="both jobs run")
    savepoint = session.get_client().trigger_savepoint(submitted.job_id, str(tmp_path / "savepoints"))
    assert savepoint.startswith(str(tmp_path / "savepoints")), savepoint
    assert str(tmp_path / "savepoints") in _cli("savepoint", cli_job, str(tmp_path / "savepoints"), "--cluster", home, cwd=tmp_path)
    session.get_client().stop_with_savepoint(submitted.job_id, str(tmp_path / "savepoints"))
    _cli("stop", cli_job, "--savepoint-path", str(tmp_path / "savepoints"), "--cluster", home, cwd=tmp_path)
    for job in (cli_job, submitted.job_id):
        assert bench._await_result(rest, job, timeout_s=60).status.value == "FINISHED"
    # or given only ZooKeeper, the cluster id and the token (no cluster file at all)
    by_zookeeper = MillraceClusterResource(
        mode="session", zookeeper_quorum=ha_cluster.settings.quorum, ha_cluster_id=ha_cluster.settings.cluster_id,
        token=ha_cluster.first.token, spark=SparkResource(),
    )
    assert {j["jid"] for j in by_zookeeper.list_jobs()} >= {cli_job, submitted.job_id}


def test_jobs_are_suspended_while_zookeeper_is_lost_and_recovered_when_it_returns(tmp_path: Path) -> None:
    zookeeper = ZooKeeperServer(tmp_path / "zk").start()
    cluster = bench.HaCluster(tmp_path, zookeeper.connect_string, "local", SESSION_TIMEOUT_MS, slots=2)
    try:
        first, _ = cluster.start_job_managers(2)
        client = rest_client(first)
        events = 28_000
        job_id = client.submit_job(_main_job(tmp_path, events, rate=4_000))
        wait_until(lambda: _running_with_a_checkpoint(client, job_id), timeout=60, what="the job runs and checkpointed")
        leader = cluster.leader()
        zookeeper.stop()
        # after the session timeout without ZooKeeper the leader cannot vouch for its leadership: it
        # suspends the job (its REST refers clients elsewhere) and commits nothing more
        wait_until(lambda: _role(leader) == "standby", timeout=30, what="the leader without ZooKeeper steps down")
        with pytest.raises(RestError) as refused:
            _own_view(leader).job_details(job_id)
        assert refused.value.status == 503
        zookeeper.start()
        assert bench._await_result(client, job_id, timeout_s=180).status.value == "FINISHED"
        check = bench.check_windowed_sum(str(tmp_path / "windowed_sum-ha"), events)
        assert check["verified"], check
        assert "suspending the job" in Path(leader.log or "").read_text()
    finally:
        cluster.close()
        zookeeper.stop()


def test_application_mode_with_high_availability_is_refused_with_the_reason() -> None:
    with pytest.raises(ValueError, match="not supported in application mode"):
        ClusterConfig(mode="application", home="/tmp/x", high_availability={"type": "zookeeper", "quorum": "127.0.0.1:2181"},
                      application={"program": "job.py"})
