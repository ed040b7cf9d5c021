"""Restores that do not match the program (issue 24): a changed key type, a changed state type
(refused, or migrated), a damaged savepoint, and `run -s` pointed at a table that is no savepoint.

One savepoint of a keyed job (int keys; a LONG count and a ROW of the last record per key) is
taken once; each test restores a changed program from it on a MiniCluster with local
TaskManagers. Refusals must fail the job at once: FAILED, no restart although checkpointing is on
(its default restart strategy would restart), and a message that names what does not fit.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import Configuration, Row, WatermarkStrategy
from runtime.api.common.typeinfo import Types
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import KeyedProcessFunction, StreamExecutionEnvironment
from runtime.api.datastream.state import ValueStateDescriptor
from runtime.core.checkpoint import CheckpointingMode
from runtime.core.errors import JobExecutionError
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m
from tests.integration.runtime.test_fault_tolerance import wait_for_checkpoints
from tests.integration.runtime.test_savepoints import savepoint

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
N = 20_000
KEYS = 10
COUNT_V1 = Types.LONG()
LAST_V1 = Types.ROW_NAMED(["id", "n"], [Types.LONG(), Types.LONG()])
LAST_V2 = Types.ROW_NAMED(["id", "n", "note"], [Types.LONG(), Types.LONG(), Types.STRING()])
OUT_TYPE = Types.ROW_NAMED(["key", "count", "last"], [Types.STRING(), Types.STRING(), Types.STRING()])


class Count(KeyedProcessFunction):
    """Per key: a count (ValueState 'count') and the last record (ValueState 'last', a Row).

    Emits, for the first record of each key this run sees, what the state held then (repr of the
    restored values, so a test sees their Python types); nothing for the others."""

    def __init__(self, count_type: Any, last_type: Any) -> None:
        self.count_type, self.last_type = count_type, last_type

    def open(self, ctx: Any) -> None:
        self.count = ctx.get_state(ValueStateDescriptor("count", self.count_type))
        self.last = ctx.get_state(ValueStateDescriptor("last", self.last_type))
        self.seen: set[Any] = set()

    def process_element(self, i: int, ctx: Any):
        key = ctx.get_current_key()
        before, last = self.count.value(), self.last.value()
        self.count.update((before or 0) + 1)
        self.last.update(Row(id=i, n=(before or 0) + 1) if len(self.last_type.field_types) == 2 else Row(id=i, n=(before or 0) + 1, note="v2"))
        if key not in self.seen:
            self.seen.add(key)
            yield Row(key=repr(key), count=repr(before), last=repr(last))


def program(tmp: Path, savepoint_path: str | None = None, key: Any = lambda i: i % KEYS, count_type: Any = COUNT_V1,
            last_type: Any = LAST_V1, rate: int | None = 10_000, out: str = "out") -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp / "checkpoints"))
    conf.set_string("state.savepoints.dir", str(tmp / "savepoints"))
    if savepoint_path:
        conf.set_string("execution.savepoint.path", savepoint_path)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    env.enable_checkpointing(300, CheckpointingMode.EXACTLY_ONCE)  # so the restart strategy would restart
    limiter = RateLimiterStrategy.per_second(rate) if rate else None
    (
        env.from_source(DataGeneratorSource(lambda i: i, N, rate_limiter_strategy=limiter), WatermarkStrategy.no_watermarks(), "ids").uid("ids")
        .key_by(key)
        .process(Count(count_type, last_type), output_type=OUT_TYPE).name("counts").uid("counts")
        .sink_to(DeltaSink(str(tmp / out))).uid("sink")
    )
    return env


@pytest.fixture(scope="module")
def cluster() -> Iterator[MiniCluster]:
    c = MiniCluster(MiniClusterConfig(provider="local", heartbeat_timeout_ms=5000, tm_log_level=os.environ.get("MILLRACE_TM_LOG_LEVEL", "WARNING"))).start()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def saved(cluster: MiniCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(folder, savepoint path) of the int-keyed job, stopped with a savepoint in the middle."""
    tmp = tmp_path_factory.mktemp("restore-checks")
    client = cluster.submit(program(tmp).get_job_graph("counts"))
    wait_for_checkpoints(cluster, client.job_id, 1)
    st = savepoint(cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    return tmp, st.location


def fails_at_once(cluster: MiniCluster, env: StreamExecutionEnvironment, name: str) -> str:
    """Submit; the job must end FAILED without a single restart. Returns the failure message."""
    client = cluster.submit(env.get_job_graph(name))
    with pytest.raises(JobExecutionError) as e:
        client.get_job_execution_result(timeout=60)
    assert client.get_job_status() is JobStatus.FAILED
    exceptions = cluster.dispatcher_gateway().call_sync("request_job_exceptions", m.JobIdMessage(job_id=client.job_id), timeout=10)
    assert exceptions.num_restarts == 0, [x.error.describe() for x in exceptions.entries]
    assert exceptions.root_exception is not None and exceptions.root_exception.throwable_type.value == "NonRecoverableError"
    return str(e.value)


def restored_rows(tmp: Path, table: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(tmp / table)).to_pyarrow_table().to_pylist()


# --- key type ----------------------------------------------------------------------------------------
def test_an_int_keyed_savepoint_restored_by_a_str_keyed_program_fails_at_once(cluster: MiniCluster, saved: tuple[Path, str]) -> None:
    tmp, path = saved
    msg = fails_at_once(cluster, program(tmp, path, key=lambda i: str(i % KEYS), out="out-str-keys"), "counts-str-keys")
    assert "'counts'" in msg and "Python int" in msg and "Python str" in msg, msg


# --- state type --------------------------------------------------------------------------------------
def test_a_long_state_restored_as_string_fails_naming_state_operator_and_both_types(cluster: MiniCluster, saved: tuple[Path, str]) -> None:
    tmp, path = saved
    msg = fails_at_once(cluster, program(tmp, path, count_type=Types.STRING(), out="out-string"), "counts-string")
    assert "state 'count'" in msg and "'counts'" in msg and "LONG" in msg and "STRING" in msg, msg


def test_a_long_state_restored_as_a_row_fails(cluster: MiniCluster, saved: tuple[Path, str]) -> None:
    tmp, path = saved
    msg = fails_at_once(cluster, program(tmp, path, count_type=Types.ROW_NAMED(["c"], [Types.LONG()]), out="out-row"), "counts-row")
    assert "state 'count'" in msg and "LONG" in msg and "ROW_NAMED(c: LONG)" in msg, msg


def test_a_widened_count_and_a_row_with_a_new_nullable_field_are_migrated(cluster: MiniCluster, saved: tuple[Path, str]) -> None:
    """LONG -> DOUBLE and ROW_NAMED(id, n) -> ROW_NAMED(id, n, note): the job restores, and what
    the state holds for each key is the old value converted (a float; the row with note None)."""
    tmp, path = saved
    env = program(tmp, path, count_type=Types.DOUBLE(), last_type=LAST_V2, rate=None, out="out-migrated")
    result = cluster.submit(env.get_job_graph("counts-migrated")).get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED
    rows = restored_rows(tmp, "out-migrated")
    assert sorted(r["key"] for r in rows) == sorted(repr(k) for k in range(KEYS))  # every key restored, once per subtask's first record
    for r in rows:
        count = eval(r["count"])  # noqa: S307 - our own repr of a float
        assert type(count) is float and count > 0, r
        assert r["last"].startswith("Row(id=") and r["last"].endswith(", note=None)"), r


# --- a damaged savepoint -------------------------------------------------------------------------------
def test_a_truncated_state_file_fails_the_job_at_once_naming_the_file(cluster: MiniCluster, saved: tuple[Path, str], tmp_path: Path) -> None:
    _, path = saved
    damaged = tmp_path / "damaged-savepoint"
    shutil.copytree(path, damaged)
    state_files = sorted(damaged.glob("checkpoint_id=*/state-*.parquet"))
    assert state_files
    for f in state_files:
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    msg = fails_at_once(cluster, program(tmp_path, str(damaged), rate=None), "counts-damaged")
    assert any(str(f) in msg for f in state_files), msg
    assert "damaged" in msg


# --- run -s on a table that is no savepoint ----------------------------------------------------------------
def test_restoring_from_an_output_table_says_what_the_path_is_and_what_was_expected(cluster: MiniCluster, saved: tuple[Path, str], tmp_path: Path) -> None:
    tmp, _ = saved
    output_table = str(tmp / "out")  # the first job's Delta output
    client = cluster.submit(program(tmp_path, output_table, rate=None).get_job_graph("counts-from-output"))
    with pytest.raises(JobExecutionError) as e:
        client.get_job_execution_result(timeout=60)
    msg = str(e.value)
    assert "KeyError" not in msg and output_table in msg, msg
    assert "not a savepoint" in msg and "checkpoint_id" in msg, msg
    details = cluster.dispatcher_gateway().call_sync("request_job_details", m.JobIdMessage(job_id=client.job_id), timeout=10)
    assert all(s.attempt_number == 0 and s.state.value in ("CREATED", "CANCELED") for v in details.vertices for s in v.subtasks)  # no task ran


def test_millrace_run_s_on_an_output_table_prints_a_clear_error(saved: tuple[Path, str], tmp_path: Path) -> None:
    tmp, _ = saved
    output_table = str(tmp / "out")
    env = dict(os.environ, MILLRACE_HOME=str(tmp_path / "home"))
    program_file = ROOT / "tests" / "integration" / "cluster" / "programs" / "squares.py"
    run = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "run", "--provider", "local", "-s", output_table, str(program_file), "--output", str(tmp_path / "sq")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert run.returncode != 0
    assert "KeyError" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert output_table in run.stderr and "not a savepoint" in run.stderr, run.stderr
