"""Failures and bad input on a real MiniCluster with local-process TaskManagers."""
from __future__ import annotations

import os
import signal
import socket
import time
from typing import Any

import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import use_executor
from runtime.core.errors import AuthenticationError, JobExecutionError
from runtime.core.states import JobStatus
from runtime.deploy.local_provider import LocalProcessProvider
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc.service import RpcService
from tests.waiting import wait_for_all_subtasks, wait_until


def _slow_job(env: StreamExecutionEnvironment, events: int = 10_000_000, delay_s: float = 0.01) -> None:
    def slow(x: int) -> int:
        if x % 1000 == 0:
            time.sleep(delay_s)
        return x

    src = DataGeneratorSource(lambda i: i, events, batch_size=1000)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "numbers").map(slow).name("slow map").print()


def _job_graph(env: StreamExecutionEnvironment, name: str):
    return env.get_job_graph(name)


def test_user_exception_fails_job_with_type_message_traceback_operator_and_subtask(mini_cluster: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)

    def explode_at_777(x: int) -> int:
        if x == 777:
            raise ValueError(f"bad record {x}")
        return x

    src = DataGeneratorSource(lambda i: i, 5000, batch_size=100)
    env.from_source(src, WatermarkStrategy.no_watermarks(), "numbers").map(explode_at_777).name("exploding map").print()
    with use_executor(mini_cluster.executor()):
        with pytest.raises(JobExecutionError) as info:
            env.execute("exploding")
    err = info.value
    text = str(err)
    assert err.cause_info is not None
    assert err.cause_info.type_name == "ValueError"
    assert "bad record 777" in text
    assert "exploding map" in text  # the operator
    assert "/2)" in (err.cause_info.task or "")  # the subtask, e.g. "... (1/2)#0"
    assert "explode_at_777" in err.cause_info.traceback  # the user's frame in the task's traceback
    assert "FAILED" in text


def test_killed_task_manager_fails_job_within_5s_naming_it(mini_cluster: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    _slow_job(env)
    client = mini_cluster.submit(_job_graph(env, "long-running"))
    tms = mini_cluster.wait_for_task_managers(2, timeout=30)
    wait_for_all_subtasks(mini_cluster, client.job_id)
    victim = tms[0]
    os.kill(victim.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    with pytest.raises(JobExecutionError) as info:
        client.get_job_execution_result(timeout=30)
    elapsed = time.monotonic() - killed_at
    # the bound is the requirement (this test's name): a dead process is noticed by its closed
    # connections at once, not after the 5 s heartbeat timeout of the mini_cluster fixture
    assert elapsed < 5.0, f"job took {elapsed:.1f}s to fail after the TaskManager died"
    assert client.get_job_status() is JobStatus.FAILED
    assert victim.tm_id in str(info.value)
    assert "lost" in str(info.value)
    # a failed job (no restarts) does not make the ResourceManager start a replacement TaskManager:
    # once the loss is handled and the job's requirements are gone, nothing can ask for one
    rm = mini_cluster.resource_manager
    wait_until(lambda: [t.tm_id for t in mini_cluster.task_managers()] == [tms[1].tm_id] and client.job_id not in rm.slot_manager.requirements,
               timeout=10, what="the loss handled and the failed job's slot requirements withdrawn", interval=0.05)
    assert rm._tm_seq == 2, "a replacement TaskManager was requested for a failed job"


class _OneTaskManagerProvider(LocalProcessProvider):
    """Starts the first TaskManager asked for and never another (like a Spark cluster with one free executor)."""

    def start_task_manager(self, tm_id: str, spec: Any) -> None:
        if not self.processes:
            super().start_task_manager(tm_id, spec)


def test_job_that_cannot_get_its_slots_fails_saying_needed_and_had() -> None:
    # the cluster may have 2 TaskManagers (so the job is accepted), but only one ever comes up
    cluster = MiniCluster(
        MiniClusterConfig(provider="local", max_task_managers=2, tm_log_level="WARNING"),
        provider=_OneTaskManagerProvider(log_level="WARNING"),
    ).start()
    try:
        conf = Configuration()
        conf.set_string("slot.request.timeout.s", "3")
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(2)
        env.from_collection([1, 2, 3]).map(lambda x: x).set_parallelism(2).print()
        with use_executor(cluster.executor()):
            with pytest.raises(JobExecutionError) as info:
                env.execute("too-big")
        text = str(info.value)
        assert "needs 2 slots and has 1" in text
        assert "NoResourceAvailableError" in text
    finally:
        cluster.close()


def test_unauthenticated_peers_are_refused_and_the_cluster_keeps_working(mini_cluster: MiniCluster, cluster_env: MiniCluster) -> None:
    host, port = mini_cluster.address
    # a raw socket speaking garbage
    with socket.create_connection((host, port), timeout=5) as s:
        s.recv(64)  # the server's challenge
        s.sendall(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 100)
        s.settimeout(5)
        assert s.recv(64) == b""  # closed on us
    # a real RPC client with the wrong secret
    intruder = RpcService("not-the-secret", "intruder", listen=False).start()
    try:
        with pytest.raises(AuthenticationError):
            intruder.connect(host, port)
    finally:
        intruder.stop()
    assert mini_cluster.rpc.refused_connections >= 2
    # the data port of a TaskManager refuses too
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3]).map(lambda x: x + 1).print()
    with use_executor(mini_cluster.executor()):
        env.execute("after-intruders")
    tm = mini_cluster.task_managers()[0]
    with socket.create_connection((tm.host if tm.host != socket.gethostname() else "127.0.0.1", tm.data_port), timeout=5) as s:
        s.recv(64)
        s.sendall(b"\x00" * 100)
        s.settimeout(5)
        assert s.recv(64) == b""


def test_cancel_stops_tasks_and_frees_slots(mini_cluster: MiniCluster) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    _slow_job(env)
    client = mini_cluster.submit(_job_graph(env, "to-cancel"))
    mini_cluster.wait_for_task_managers(2, timeout=30)
    wait_for_all_subtasks(mini_cluster, client.job_id)
    client.cancel()
    with pytest.raises(JobExecutionError):
        client.get_job_execution_result(timeout=30)
    assert client.get_job_status() is JobStatus.CANCELED
    wait_until(lambda: all(t.slots_free == t.slots_total for t in mini_cluster.task_managers()), timeout=10,
               what="the slots freed after cancel", interval=0.05)


def test_a_delta_sink_into_a_folder_of_other_files_fails_the_job_and_touches_nothing(mini_cluster: MiniCluster, tmp_path) -> None:
    """`--output` pointing at a folder that holds the user's notes: refused before any task writes
    (a table built around them would let a later VACUUM delete them)."""
    from runtime.api.connectors.delta import DeltaSink

    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "notes.txt").write_text("my notes")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.from_source(DataGeneratorSource(lambda i: {"id": i}, 1000), WatermarkStrategy.no_watermarks(), "ids").sink_to(DeltaSink(str(folder)))
    client = mini_cluster.submit(_job_graph(env, "into-my-folder"))
    with pytest.raises(JobExecutionError, match="not empty and not a Delta table"):
        client.get_job_execution_result(timeout=60)
    assert sorted(os.listdir(folder)) == ["notes.txt"] and (folder / "notes.txt").read_text() == "my notes"


def test_malformed_call_frames_of_an_authenticated_peer_are_answered_or_dropped_quietly(mini_cluster: MiniCluster, caplog) -> None:
    """After authentication, a call frame without an id is dropped with one log line (no traceback),
    one with an id but no method gets an error reply, and the connection keeps working."""
    import asyncio
    import logging

    from runtime.core.errors import RpcError
    from runtime.rpc import gateways as gw
    from runtime.rpc import messages as m

    host, port = mini_cluster.address
    client = RpcService(mini_cluster.secret, "prober", listen=False).start()
    try:
        peer = client.connect(host, port)
        conn = client._peers[peer]
        caplog.set_level(logging.DEBUG)

        def send(frame: dict[str, Any]) -> None:
            asyncio.run_coroutine_threadsafe(conn.send(frame), client.loop).result(5)

        send({"k": "call", "ep": gw.DISPATCHER, "m": "list_jobs"})  # no id
        # a call with an id but no method: answered with an error
        waiter = asyncio.run_coroutine_threadsafe(_await_reply(conn, 424242), client.loop)
        send({"k": "call", "id": 424242, "ep": gw.DISPATCHER})
        reply = waiter.result(5)
        assert isinstance(reply, RpcError) and "malformed call" in str(reply)
        # the connection still serves calls
        listed = client.gateway(gw.DispatcherGateway, gw.DISPATCHER, peer_id=peer).call_sync("list_jobs", m.Empty(), timeout=10)
        assert isinstance(listed, m.JobList)
    finally:
        client.stop()
    text = caplog.text
    assert "dropped a malformed call frame: no call id" in text
    assert "Traceback" not in text and "exception was never retrieved" not in text


async def _await_reply(conn, call_id: int):
    import asyncio

    fut = asyncio.get_running_loop().create_future()
    conn._pending[call_id] = fut
    try:
        return await asyncio.wait_for(fut, 5)
    except Exception as e:  # noqa: BLE001 - the error reply is what we wait for
        return e
