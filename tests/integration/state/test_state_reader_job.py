"""The state reader on the main job: the open windows in a savepoint of windowed_sum, together with
the windows the job had already fired into its output, equal a plain-Python partial aggregation of
exactly the events the job had processed (the source's position in the same savepoint says which):
each window in one of the two, none in both, none missing (a reader that dropped key groups fails)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pipelines.jobs import windowed_sum
from runtime.api.common import Configuration
from runtime.api.connectors.generator import split_indices
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.keygroups import KeyGroupRange
from runtime.deploy.minicluster import MiniCluster
from runtime.storage.savepoints import read_savepoint
from runtime.storage.state_files import read_operator_state
from runtime.storage.state_reader import list_operators, read_keyed_state
from tests.integration.runtime.test_fault_tolerance import wait_for_checkpoints
from tests.integration.runtime.test_savepoints import savepoint

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
N = 200_000


def processed_events(location: str, source_id: str, n: int) -> set[int]:
    """The generator's position in the savepoint (its remaining splits) -> the indices already emitted."""
    meta = read_savepoint(location)
    ctx = read_operator_state(location, meta.operator_files[source_id], source_id, KeyGroupRange(0, 127), 0, 1)
    remaining = {i for splits in ctx.operator_lists.values() for s in splits for i in split_indices(tuple(s))}
    return set(range(n)) - remaining


def fired_windows(output: str) -> dict[tuple[int, int], tuple[int, int]]:
    """(user, window start) -> (count, sum) of the windows in the job's output table (none if it has no table yet)."""
    from deltalake import DeltaTable

    if not (Path(output) / "_delta_log").is_dir():
        return {}
    rows = DeltaTable(output).to_pyarrow_table().to_pylist()
    got = {(r["user_id"], r["window_start"]): (r["count"], r["sum"]) for r in rows}
    assert len(got) == len(rows), f"{len(rows) - len(got)} windows fired twice into {output}"
    return got


def assert_state_and_output_are_the_partial_windows(
    open_windows: list[tuple[int, int, int, int]], fired: dict[tuple[int, int], tuple[int, int]], reference: dict[tuple[int, int], tuple[int, int]]
) -> None:
    """(user, window start, count, sum) of every window in state, with the windows already fired into the
    output, are exactly the reference's partial windows: each once, in state or in the output, not both."""
    in_state = {(user, window): (count, total) for user, window, count, total in open_windows}
    assert len(in_state) == len(open_windows), f"{len(open_windows) - len(in_state)} windows twice in state"
    both = in_state.keys() & fired.keys()
    assert not both, f"{len(both)} windows both open in state and fired, e.g. {sorted(both)[:3]}"
    missing = reference.keys() - in_state.keys() - fired.keys()
    assert not missing, f"{len(missing)} of {len(reference)} windows neither in state nor fired, e.g. {sorted(missing)[:3]}"
    unexpected = (in_state.keys() | fired.keys()) - reference.keys()
    assert not unexpected, f"{len(unexpected)} windows of events not processed, e.g. {sorted(unexpected)[:3]}"
    wrong = {k: (v, reference[k]) for k, v in {**in_state, **fired}.items() if v != reference[k]}
    assert not wrong, f"{len(wrong)} windows with other (count, sum) than the reference, e.g. {sorted(wrong.items())[:3]}"


def partial_windows(indices: set[int]) -> dict[tuple[int, int], tuple[int, int]]:
    out: dict[tuple[int, int], tuple[int, int]] = {}
    for i in indices:
        x = ((i * 1103515245 + 42) % windowed_sum.MODULUS) ** 2 % windowed_sum.MODULUS
        key = (x % 10000, (windowed_sum.BASE_TS_MS + i) - (windowed_sum.BASE_TS_MS + i) % windowed_sum.WINDOW_MS)
        c, s = out.get(key, (0, 0))
        out[key] = (c + 1, s + ((x // 10000) % 100) * 2)
    return out


@pytest.fixture(scope="module")
def windowed_savepoint(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """windowed_sum at p=2, throttled, stopped with a savepoint in the middle of its input."""
    from runtime.deploy.minicluster import MiniClusterConfig

    tmp = tmp_path_factory.mktemp("windowed-savepoint")
    conf = Configuration()
    conf.set_string("state.checkpoints.dir", str(tmp / "checkpoints"))
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    windowed_sum.build(env, N, str(tmp / "out"), rate=40_000, checkpoint_interval_ms=500)
    job_graph = env.get_job_graph("windowed_sum")
    ops = {op.name: op.operator_id for v in job_graph.vertices for op in v.operators}
    with MiniCluster(MiniClusterConfig(provider="local", tm_log_level="WARNING")) as cluster:
        client = cluster.submit(job_graph)
        wait_for_checkpoints(cluster, client.job_id, 2)
        st = savepoint(cluster, client.job_id, stop=True, target=str(tmp / "sp"))
        assert st.status == "COMPLETED", st.failure
        client.get_job_execution_result(timeout=60)
    return {"location": st.location, "window_op": ops["count and sum per user and window"], "source_op": ops["events"], "output": str(tmp / "out")}


def test_open_windows_and_fired_ones_equal_a_reference_partial_aggregation(windowed_savepoint: dict[str, Any]) -> None:
    loc, op = windowed_savepoint["location"], windowed_savepoint["window_op"]
    done = processed_events(loc, windowed_savepoint["source_op"], N)
    assert 0 < len(done) < N
    table = read_keyed_state(loc, op)
    assert table.num_rows > 0
    assert table.column_names == ["key_group", "state_name", "state_kind", "key", "namespace", "value"]
    assert table.schema.field("key").type == "int64" and table.schema.field("namespace").type == "int64"
    open_windows = []
    for row in table.to_pylist():
        assert row["state_name"] == "__window_panes__", row
        count, total, fired = (item["long"] for item in row["value"])
        assert fired == 0
        open_windows.append((row["key"], row["namespace"], count, total))
    fired_out = fired_windows(windowed_savepoint["output"])
    assert fired_out, "no window fired before the savepoint: the output half of the check is empty"
    assert_state_and_output_are_the_partial_windows(open_windows, fired_out, partial_windows(done))


def test_listing_and_errors(windowed_savepoint: dict[str, Any]) -> None:
    from runtime.core.errors import StorageError

    loc = windowed_savepoint["location"]
    infos = {i.operator_id: i for i in list_operators(loc)}
    assert windowed_savepoint["window_op"] in infos and windowed_savepoint["source_op"] in infos
    assert infos[windowed_savepoint["window_op"]].max_parallelism == 128
    with pytest.raises(StorageError, match="no state of operator 'nope'"):
        read_keyed_state(loc, "nope")
    with pytest.raises(StorageError, match="no keyed state 'nope'"):
        read_keyed_state(loc, windowed_savepoint["window_op"], "nope")


def test_millrace_state_prints_rows(windowed_savepoint: dict[str, Any]) -> None:
    loc, op = windowed_savepoint["location"], windowed_savepoint["window_op"]
    listing = subprocess.run([sys.executable, "-m", "runtime.cli", "state", loc], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert f"operator {op}" in listing.stdout and "__window_panes__ (pane)" in listing.stdout
    rows = read_keyed_state(loc, op).num_rows
    out = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "state", loc, "--operator", op, "--limit", "3"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert f"{rows:,} rows" in out.stdout and out.stdout.count("key_group=") == 3
    bad = subprocess.run(
        [sys.executable, "-m", "runtime.cli", "state", str(Path(loc).parent / "missing")], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 2 and "holds no checkpoint or savepoint" in bad.stderr
