"""Savepoints: trigger, stop-with-savepoint, restore with another parallelism, restore rules.

Every restore is checked row for row against the plain-Python reference (the ids 0..N-1, each
exactly once in the Delta output).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import Configuration, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.errors import JobExecutionError, RpcError, UnknownJobError
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.graph.job_graph import JobGraph
from runtime.rpc import messages as m
from tests.integration.runtime.test_fault_tolerance import assert_exactly_once, id_source, ids, read_ids, wait_for_checkpoints
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


class AddOne:
    """A stateless step whose presence or absence changes nothing but the topology."""

    def __call__(self, batch: Any) -> Any:
        return batch


def program(tmp_path: Path, parallelism: int, n: int, rate: int, savepoint: str | None = None, allow_non_restored: bool = False,
            extra_map: bool = True, max_parallelism: int | None = None, interval_ms: int = 300, uids: bool = True) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    conf.set_string("state.savepoints.dir", str(tmp_path / "savepoints"))
    if savepoint:
        conf.set_string("execution.savepoint.path", savepoint)
        conf.set_string("execution.savepoint.ignore-unclaimed-state", str(allow_non_restored).lower())
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    if max_parallelism:
        env.set_max_parallelism(max_parallelism)
    if interval_ms:
        env.enable_checkpointing(interval_ms, CheckpointingMode.EXACTLY_ONCE)
    stream = env.from_source(id_source(n, rate), WatermarkStrategy.no_watermarks(), "ids")
    stream = stream.uid("ids") if uids else stream
    if extra_map:
        stream = stream.map_batches(AddOne()).name("identity")
        stream = stream.uid("identity") if uids else stream
    sink = stream.sink_to(DeltaSink(str(tmp_path / "out")))
    if uids:
        sink.uid("sink")
    return env


def savepoint(cluster: MiniCluster, job_id: str, stop: bool = False, drain: bool = False, target: str | None = None, timeout: float = 60) -> m.SavepointStatus:
    gw = cluster.dispatcher_gateway()
    trig = gw.call_sync("trigger_savepoint", m.TriggerSavepoint(job_id=job_id, stop=stop, drain=drain, target_directory=target), timeout=10)

    def done() -> m.SavepointStatus | None:
        st = gw.call_sync("request_savepoint_status", m.SavepointStatusRequest(job_id=job_id, trigger_id=trig.trigger_id), timeout=10)
        return st if st.status != "IN_PROGRESS" else None

    return wait_until(done, timeout=timeout, what="the savepoint to end")


def delta_commits(table: str) -> int:
    log = Path(table) / "_delta_log"
    return len(list(log.glob("*.json"))) if log.exists() else 0


@pytest.mark.parametrize("new_parallelism", [3, 1])
def test_stop_with_savepoint_then_restore_with_another_parallelism_is_exactly_once(mini_cluster: MiniCluster, tmp_path: Path, new_parallelism: int) -> None:
    n = 120_000
    client = mini_cluster.submit(program(tmp_path, 2, n, 20_000).get_job_graph("ids-to-delta"))
    wait_for_checkpoints(mini_cluster, client.job_id, 2)
    st = savepoint(mini_cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    assert st.location and st.location.startswith(str(tmp_path / "savepoints"))
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    assert delta_commits(st.location) == 1  # one savepoint = one commit
    partial = read_ids(tmp_path / "out")
    assert 0 < len(partial) < n and len(partial) == len(set(partial))  # it stopped in the middle, every row once
    restored = mini_cluster.submit(program(tmp_path, new_parallelism, n, 100_000, savepoint=st.location).get_job_graph("ids-to-delta"))
    assert restored.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert_exactly_once(tmp_path / "out", n)


def test_a_savepoint_leaves_the_job_running_and_marks_the_history(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 60_000
    client = mini_cluster.submit(program(tmp_path, 2, n, 15_000, interval_ms=0).get_job_graph("savepoint-no-periodic"))
    wait_until(lambda: client.get_job_status() is JobStatus.RUNNING and _all_running(mini_cluster, client.job_id), timeout=60, what="running")
    st = savepoint(mini_cluster, client.job_id, target=str(tmp_path / "mine"))
    assert st.status == "COMPLETED", st.failure
    assert st.location.startswith(str(tmp_path / "mine") + "/savepoint-")
    assert client.get_job_status() is JobStatus.RUNNING
    stats = mini_cluster.dispatcher_gateway().call_sync("request_checkpoint_statistics", m.JobIdMessage(job_id=client.job_id), timeout=10)
    import json

    parsed = json.loads(stats.statistics_json)
    assert [e["is_savepoint"] for e in parsed["history"] if e["status"] == "COMPLETED"] == [True]
    assert parsed["latest_savepoint"]["external_path"] == st.location and parsed["latest_completed"] is None
    assert client.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert_exactly_once(tmp_path / "out", n)


def _all_running(cluster: MiniCluster, job_id: str) -> bool:
    details = cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=10)
    return all(s.state.value == "RUNNING" for v in details.vertices for s in v.subtasks)


def test_a_failed_savepoint_leaves_no_commit_and_the_job_running(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 60_000
    client = mini_cluster.submit(program(tmp_path, 2, n, 15_000).get_job_graph("savepoint-fails"))
    wait_for_checkpoints(mini_cluster, client.job_id, 1)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the savepoint folder would go")
    st = savepoint(mini_cluster, client.job_id, stop=True, target=str(blocked))
    assert st.status == "FAILED" and st.failure is not None
    assert blocked.read_text().startswith("a file")  # untouched
    assert client.get_job_status() is JobStatus.RUNNING
    assert client.get_job_execution_result(timeout=120).status is JobStatus.FINISHED  # sources resumed
    assert_exactly_once(tmp_path / "out", n)


def test_restore_rules_missing_operator_and_max_parallelism(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 60_000
    client = mini_cluster.submit(program(tmp_path, 2, n, 15_000).get_job_graph("rules"))
    wait_for_checkpoints(mini_cluster, client.job_id, 1)
    st = savepoint(mini_cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    # the sink keeps its state (uid "sink"); the map had none: removing it is fine
    ok = mini_cluster.submit(program(tmp_path, 2, n, 100_000, savepoint=st.location, extra_map=False).get_job_graph("rules"))
    assert ok.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert_exactly_once(tmp_path / "out", n)
    # a program without the source's uid: its state cannot be mapped
    bad = program(tmp_path, 2, n, 100_000, savepoint=st.location)
    bad_graph = bad.get_job_graph("rules")
    for v in bad_graph.vertices:
        for op in v.operators:
            if op.operator_id == "ids":
                op.operator_id = "renamed-source"
    with pytest.raises(JobExecutionError) as e:
        mini_cluster.submit(bad_graph).get_job_execution_result(timeout=60)
    assert "'ids'" in str(e.value) and "--allow-non-restored-state" in str(e.value)
    import uuid

    allowed = bad_graph.model_copy(update={"job_id": uuid.uuid4().hex, "config": {**bad_graph.config, "execution.savepoint.ignore-unclaimed-state": "true"}})
    assert mini_cluster.submit(allowed).get_job_execution_result(timeout=120).status is JobStatus.FINISHED  # the source starts over
    # max parallelism changed: refused naming both values
    with pytest.raises(JobExecutionError) as e:
        other_max_parallelism = program(tmp_path, 2, n, 100_000, savepoint=st.location, max_parallelism=64).get_job_graph("rules")
        mini_cluster.submit(other_max_parallelism).get_job_execution_result(timeout=60)
    assert "max parallelism 128" in str(e.value) and "64" in str(e.value)


def test_unknown_jobs_and_triggers_are_refused(mini_cluster: MiniCluster) -> None:
    gw = mini_cluster.dispatcher_gateway()
    with pytest.raises((RpcError, UnknownJobError), match="unknown job id nope"):
        gw.call_sync("trigger_savepoint", m.TriggerSavepoint(job_id="nope"), timeout=10)
    with pytest.raises((RpcError, UnknownJobError), match="unknown job id nope"):
        gw.call_sync("request_savepoint_status", m.SavepointStatusRequest(job_id="nope", trigger_id="x"), timeout=10)


class Slow:
    """Backpressure: each batch takes a while, so the source's output buffers fill up."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __call__(self, batch: Any) -> Any:
        import time

        time.sleep(self.seconds)
        return batch


def test_a_savepoint_of_a_backpressured_job_completes(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 400_000
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    (
        env.from_source(DataGeneratorSource(None, n, batch_generator=ids), WatermarkStrategy.no_watermarks(), "ids").uid("ids").set_parallelism(1)
        .rebalance()  # a network exchange, so buffers fill and the source is held back
        .map_batches(Slow(0.05)).name("slow").uid("slow")
        .sink_to(DeltaSink(str(tmp_path / "out"))).uid("sink")
    )
    client = mini_cluster.submit(env.get_job_graph("backpressured"))
    wait_until(lambda: _backpressured(mini_cluster, client.job_id), timeout=60, what="the source to be backpressured")
    st = savepoint(mini_cluster, client.job_id, stop=True, target=str(tmp_path / "sp"), timeout=120)
    assert st.status == "COMPLETED", st.failure
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    assert len(read_ids(tmp_path / "out")) < n  # stopped in the middle
    resumed = program_ids_slow_free(tmp_path, n, st.location)
    assert mini_cluster.submit(resumed).get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert_exactly_once(tmp_path / "out", n)


def program_ids_slow_free(tmp_path: Path, n: int, savepoint_path: str) -> Any:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    conf.set_string("execution.savepoint.path", savepoint_path)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    (
        env.from_source(DataGeneratorSource(None, n, batch_generator=ids), WatermarkStrategy.no_watermarks(), "ids").uid("ids")
        .rebalance()
        .map_batches(Slow(0.0)).name("slow").uid("slow")
        .sink_to(DeltaSink(str(tmp_path / "out"))).uid("sink")
    )
    return env.get_job_graph("backpressured")


def _backpressured(cluster: MiniCluster, job_id: str) -> bool:
    details = cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=job_id), timeout=10)
    src = details.vertices[0].subtasks[0]
    return src.state.value == "RUNNING" and src.backpressure_ratio > 0.5


def test_a_program_without_uids_restores_into_the_same_program(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    """Operator ids come from the topology: the same program, built again (other node ids), finds its state."""
    n = 80_000
    first = program(tmp_path, 2, n, 20_000, uids=False).get_job_graph("no-uids")
    client = mini_cluster.submit(first)
    wait_for_checkpoints(mini_cluster, client.job_id, 1)
    st = savepoint(mini_cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    program(tmp_path / "unrelated", 1, 10, 10)  # other transformations in between: node ids shift
    again = program(tmp_path, 2, n, 100_000, savepoint=st.location, uids=False).get_job_graph("no-uids")

    def node_ids(jg: JobGraph) -> list[int]:
        return [op.node_id for v in jg.vertices for op in v.operators]

    def op_ids(jg: JobGraph) -> list[str]:
        return [op.operator_id for v in jg.vertices for op in v.operators]

    assert node_ids(first) != node_ids(again) and op_ids(first) == op_ids(again)
    assert mini_cluster.submit(again).get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    assert_exactly_once(tmp_path / "out", n)


@pytest.mark.parametrize("backends", [("rocksdb", "hashmap"), ("hashmap", "rocksdb")])
def test_a_savepoint_of_one_state_backend_restores_into_the_other(mini_cluster: MiniCluster, tmp_path: Path, backends: tuple[str, str]) -> None:
    """Canonical format: windowed_sum's per-record path keeps its windows in the keyed state backend."""
    from pipelines.jobs import windowed_sum

    n, out = 30_000, str(tmp_path / "out")

    def env_for(backend: str, parallelism: int, savepoint_path: str | None = None) -> StreamExecutionEnvironment:
        conf = Configuration()
        conf.set_string("state.backend.type", backend)
        conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
        if savepoint_path:
            conf.set_string("execution.savepoint.path", savepoint_path)
        env = StreamExecutionEnvironment.get_execution_environment(conf)
        env.set_parallelism(parallelism)
        return env

    first = env_for(backends[0], 2)
    windowed_sum.build(first, n, out, per_record=True, rate=6_000, checkpoint_interval_ms=300)
    client = mini_cluster.submit(first.get_job_graph("windowed_sum"))
    wait_for_checkpoints(mini_cluster, client.job_id, 2)
    st = savepoint(mini_cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    from deltalake import DeltaTable

    # checkpoints of RocksDB are its native files; a savepoint is canonical rows, whatever the backend
    def kinds(table: str) -> set[str]:
        return set(DeltaTable(table).to_pyarrow_table(columns=["kind"]).column("kind").to_pylist())

    assert "native" not in kinds(st.location) and "keyed" in kinds(st.location)
    checkpoint_table = str(tmp_path / "checkpoints" / client.job_id)
    assert ("native" in kinds(checkpoint_table)) == (backends[0] == "rocksdb")
    second = env_for(backends[1], 3, st.location)
    windowed_sum.build(second, n, out, per_record=True)
    assert mini_cluster.submit(second.get_job_graph("windowed_sum")).get_job_execution_result(timeout=180).status is JobStatus.FINISHED
    rows = DeltaTable(out).to_pyarrow_table().to_pylist()
    got = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows}
    assert len(got) == len(rows) and got == windowed_sum.reference(n)


def _broadcast_program(tmp_path: Path, parallelism: int, n: int, rate: int, savepoint_path: str | None = None) -> StreamExecutionEnvironment:
    """ids through a keyed broadcast function: an id passes if id % 100 > the broadcast limit (50);
    ids seen before the limit wait in keyed state until it comes."""
    from runtime.api.common import Types
    from runtime.api.datastream import KeyedBroadcastProcessFunction
    from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor

    rules = MapStateDescriptor("rules", Types.STRING(), Types.INT())
    pending = ListStateDescriptor("pending", Types.LONG())

    class Above(KeyedBroadcastProcessFunction):
        def open(self, ctx: Any) -> None:
            self.pending = ctx.get_list_state(pending)

        def process_element(self, i: int, ctx: Any):
            limit = ctx.get_broadcast_state(rules).get("limit")
            if limit is None:
                self.pending.add(i)
                return []
            return [{"id": i}] if i % 100 > limit else []

        def process_broadcast_element(self, rule: tuple, ctx: Any):
            ctx.get_broadcast_state(rules).put(rule[0], rule[1])
            waiting: list[int] = []
            ctx.apply_to_keyed_state(pending, lambda _k, state: (waiting.extend(state.get()), state.clear()))
            return [{"id": i} for i in waiting if i % 100 > rule[1]]

    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp_path / "checkpoints"))
    conf.set_string("state.savepoints.dir", str(tmp_path / "savepoints"))
    if savepoint_path:
        conf.set_string("execution.savepoint.path", savepoint_path)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    env.enable_checkpointing(300, CheckpointingMode.EXACTLY_ONCE)
    limiter = RateLimiterStrategy.per_second(rate) if rate else None
    ids_stream = env.from_source(DataGeneratorSource(lambda i: i, n, rate_limiter_strategy=limiter), WatermarkStrategy.no_watermarks(), "ids").uid("ids")
    # the limit first, then no-ops: the source keeps running (checkpoints need every task running) and
    # a restored job's source, past the first record, never sends the limit again
    limits = env.from_source(
        DataGeneratorSource(
            lambda i: ("limit", 50) if i == 0 else ("noop", 0), 400, rate_limiter_strategy=RateLimiterStrategy.per_second(40) if rate else None
        ),
        WatermarkStrategy.no_watermarks(), "limits",
    ).uid("limits").set_parallelism(1)  # one subtask each: none ends early (checkpoints need every task running)
    out_type = Types.ROW_NAMED(["id"], [Types.LONG()])
    (
        ids_stream.key_by(lambda i: i % 7).connect(limits.broadcast(rules))
        .process(Above(), output_type=out_type).uid("above")
        .map(lambda d: d, output_type=out_type)
        .sink_to(DeltaSink(str(tmp_path / "out"))).uid("sink")
    )
    return env


@pytest.mark.parametrize("new_parallelism", [3, 1])
def test_broadcast_state_is_restored_from_a_savepoint_at_another_parallelism(mini_cluster: MiniCluster, tmp_path: Path, new_parallelism: int) -> None:
    """The limits source is done after the savepoint (its position is restored): every subtask of the
    restored job knows the limit only from the savepoint's broadcast state."""
    n = 40_000
    client = mini_cluster.submit(_broadcast_program(tmp_path, 2, n, 8_000).get_job_graph("broadcast"))
    wait_for_checkpoints(mini_cluster, client.job_id, 2)
    st = savepoint(mini_cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    before = read_ids(tmp_path / "out")
    restored = mini_cluster.submit(_broadcast_program(tmp_path, new_parallelism, n, 0, savepoint_path=st.location).get_job_graph("broadcast"))
    assert restored.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    got = read_ids(tmp_path / "out")
    expected = [i for i in range(n) if i % 100 > 50]
    assert len(got) > len(before) and got == expected
