"""The live events table and its appenders (pipelines/live_events.py, the `live_events` asset): the
daily events continued, one idempotent commit per day, where a day starts, and what is refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from dagster import DagsterInstance, materialize

from pipelines import live_events
from pipelines.jobs.daily_events import day_events
from pipelines.jobs.running_totals import DropBefore, build_live, live_starting_version
from pipelines.live import live_events as live_events_asset
from resources import DeltaWarehouseResource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.storage.delta_read import read_commit, read_table

pytestmark = pytest.mark.unit

N = 100  # events per day


def _events(path: str) -> dict[str, np.ndarray]:
    t = read_table(path).sort_by("ts_ms")
    return {c: np.asarray(t.column(c).to_pylist()) for c in ("user_id", "value", "ts_ms", "day")}


def _expected(*days: str, first: int = 0, end: int | None = None) -> dict[str, np.ndarray]:
    cols = [day_events(d, N) for d in days]
    out = {c: np.concatenate([x[c] for x in cols])[first:end] for c in ("user_id", "value", "ts_ms")}
    out["day"] = np.concatenate([[d] * N for d in days])[first:end]
    return out


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert {c: v.tolist() for c, v in got.items()} == {c: v.tolist() for c, v in want.items()}


def test_appends_continue_from_the_start_day_one_commit_per_day_and_a_replay_is_skipped(tmp_path: Path) -> None:
    path = str(tmp_path / "live_events")
    assert live_events.create(path) == 0 and live_events.create(path) == 0  # once
    first = live_events.append(path, 150, N, start_day="2026-01-03")
    assert [(a.version, a.first, a.end, a.day) for a in first] == [(1, 200, 300, "2026-01-03"), (2, 300, 350, "2026-01-04")]
    second = live_events.append(path, 100, N, start_day="2026-01-09")  # the table continues: the start day is for the first append
    assert [(a.version, a.day) for a in second] == [(3, "2026-01-04"), (4, "2026-01-05")]
    assert live_events.next_index(path, N) == 450
    # a retried append (the same range, say after a crash) lands nowhere
    assert [a.version for a in live_events.append_events(path, 200, 350, N)] == [None, None]
    _assert_same(_events(path), _expected("2026-01-03", "2026-01-04", "2026-01-05", end=250))
    # one day per commit: the partition values of each commit's files
    assert [{f.partition_values["day"] for f in read_commit(path, v, ["day"]).added} for v in (1, 2, 3, 4)] == [
        {"2026-01-03"}, {"2026-01-04"}, {"2026-01-04"}, {"2026-01-05"}
    ]


def test_the_first_version_of_a_day(tmp_path: Path) -> None:
    path = str(tmp_path / "live_events")
    with pytest.raises(ConfigurationError, match="there is no table"):
        live_events.first_version_of_day(path, "2026-01-03")
    live_events.create(path)
    assert live_events.first_version_of_day(path, "2026-01-03") == 0  # no events yet: from the start
    for _ in range(5):
        live_events.append(path, N // 2, N, start_day="2026-01-03")  # versions 1-5: days 3, 3, 4, 4, 5
    assert [live_events.first_version_of_day(path, d) for d in ("2026-01-01", "2026-01-03", "2026-01-04", "2026-01-05", "2026-01-06")] == [
        0, 0, 3, 5, 6
    ]
    # the live job from a daily savepoint starts there (no savepoint here: a first start), or where it is told
    assert live_starting_version(path, "2026-01-04", None) == 3
    assert live_starting_version(path, "2026-01-04", None, starting_version=1) == 1
    with pytest.raises(InvalidProgramError, match="cannot find where 2026-01-04 starts"):
        live_starting_version(str(tmp_path / "nothing"), "2026-01-04", None)
    # no starting version means "the restored positions": without a savepoint that is refused
    with pytest.raises(InvalidProgramError, match="no starting version and no savepoint"):
        build_live(StreamExecutionEnvironment.get_execution_environment(), path, "2026-01-04", str(tmp_path / "out"), None)


def test_what_an_append_refuses(tmp_path: Path) -> None:
    path = str(tmp_path / "live_events")
    with pytest.raises(ConfigurationError, match="needs a start day"):
        live_events.append(path, 10, N)
    live_events.append(path, 10, N, start_day="2026-01-02")
    with pytest.raises(ConfigurationError, match="none appended with 200 events per day"):
        live_events.append(path, 10, 2 * N, start_day="2026-01-02")  # the index -> day mapping would differ


def test_the_appender_loop_appends_at_its_rate_until_told(tmp_path: Path) -> None:
    path = str(tmp_path / "live_events")
    lines: list[str] = []
    end = live_events.run(path, rate=100_000, events_per_day=N, start_day="2026-01-02", commit_interval_ms=5, until=3 * N, emit=lines.append)
    assert end == 3 * N
    commits = [json.loads(line) for line in lines]
    assert commits[0]["first"] == N and commits[-1]["end"] == 3 * N and all(c["version"] is not None for c in commits)
    assert all(a["end"] == b["first"] for a, b in zip(commits, commits[1:]))
    _assert_same(_events(path), _expected("2026-01-02", "2026-01-03"))


def test_drop_before_keeps_the_events_from_the_start_day() -> None:
    batch = {"ts_ms": np.array([5, 9, 10, 12]), "user_id": np.array([1, 2, 3, 4])}
    assert {c: v.tolist() for c, v in DropBefore(10)(batch).items()} == {"ts_ms": [10, 12], "user_id": [3, 4]}
    assert DropBefore(0)(batch) is batch


def test_the_live_events_asset_starts_the_day_after_the_newest_daily_day_and_continues(tmp_path: Path) -> None:
    warehouse = DeltaWarehouseResource(base_path=str(tmp_path))
    instance = DagsterInstance.ephemeral()
    config = {"ops": {"live_events": {"config": {"events": 3 * N // 2, "events_per_day": N}}}}
    failed = materialize([live_events_asset], resources={"warehouse": warehouse}, run_config=config, instance=instance, raise_on_error=False)
    assert not failed.success  # no daily events, no start day: nothing to continue
    day = day_events("2026-01-02", N)  # as the daily_events asset writes a day
    warehouse.replace_rows(warehouse.table_path("daily_events"), pa.table({**day, "day": ["2026-01-02"] * N}), {"day": "2026-01-02"}, ["day"])
    for _ in range(2):
        result = materialize([live_events_asset], resources={"warehouse": warehouse}, run_config=config, instance=instance)
        assert result.success
    meta = {k: v.value for k, v in result.asset_materializations_for_node("live_events")[0].metadata.items()}
    assert (meta["first_index"], meta["end_index"], meta["days"]) == (3 * N + N // 2, 5 * N, "2026-01-04, 2026-01-05")
    _assert_same(_events(warehouse.table_path("live_events")), _expected("2026-01-03", "2026-01-04", "2026-01-05"))
