"""The running_totals program on a MiniCluster (local-process TaskManagers): days chained through
end-of-input savepoints, re-running a day, and the live job following the live events table from
the last day's savepoint, stopped with a savepoint and restored while the table grows; every total
is checked against a plain count over the generator."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from pipelines import live_events
from pipelines.jobs import running_totals
from pipelines.jobs.daily_events import day_events
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.storage.delta_read import read_table
from runtime.storage.delta_write import replace_rows
from runtime.storage.savepoints import read_savepoint
from tests.integration.runtime.test_savepoints import savepoint
from tests.running_totals_support import day_rows, expected_by_day, totals_by_user_day
from tests.running_totals_support import expected_for_day as expected_for_n
from tests.waiting import wait_until

N = 3_000  # events per day
DAYS = ["2026-01-01", "2026-01-02", "2026-01-03"]


def write_days(path: str, days: list[str], n: int = N) -> None:
    for day in days:
        cols = day_events(day, n)
        replace_rows(path, pa.table({**cols, "day": [day] * n}), {"day": day}, partition_by=["day"])


def run_day(cluster: MiniCluster, tmp_path: Path, day: str, savepoint: str | None, parallelism: int = 2) -> Any:
    conf = running_totals.configure(savepoint, str(tmp_path / "savepoints"), stop_at_end=True)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(parallelism)
    running_totals.build_daily(env, day, str(tmp_path / "events"), str(tmp_path / "totals"))
    return cluster.submit(env.get_job_graph(running_totals.JOB_NAME)).get_job_execution_result(timeout=120)


def expected_for_day(day: str) -> dict[int, tuple[int, int]]:
    return expected_for_n(day, N)


def test_days_chain_through_savepoints_and_a_rerun_gives_the_same_rows(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    write_days(str(tmp_path / "events"), DAYS)
    savepoint = None
    paths = []
    for i, day in enumerate(DAYS):
        result = run_day(mini_cluster, tmp_path, day, savepoint, parallelism=2 if i != 1 else 3)  # rescale on the way
        assert result.status is JobStatus.FINISHED
        savepoint = result.accumulators["savepoint_path"]
        paths.append(savepoint)
        assert read_savepoint(savepoint).is_savepoint
        assert day_rows(str(tmp_path / "totals"), day) == expected_for_day(day)
    # re-running day 2 from day 1's savepoint replaces day 2's rows with the same rows, others untouched
    before = {d: day_rows(str(tmp_path / "totals"), d) for d in DAYS}
    result = run_day(mini_cluster, tmp_path, DAYS[1], paths[0])
    assert result.status is JobStatus.FINISHED
    assert {d: day_rows(str(tmp_path / "totals"), d) for d in DAYS} == before
    assert read_table(str(tmp_path / "totals")).num_rows == sum(len(v) for v in before.values())


def _days_out(table: str, *days: str) -> bool:
    try:
        have = set(read_table(table, columns=["day"]).column("day").to_pylist())
    except Exception:  # noqa: BLE001 - no table yet
        return False
    return set(days) <= have


def live_env(savepoint: str, savepoints: str | None = None) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment(running_totals.configure(savepoint, savepoints, stop_at_end=False))
    env.set_parallelism(2)
    return env


def test_the_live_job_follows_the_live_table_from_the_last_days_savepoint_and_a_stop_and_restore_is_exactly_once(
    mini_cluster: MiniCluster, tmp_path: Path
) -> None:
    write_days(str(tmp_path / "events"), DAYS[:1])
    day1 = run_day(mini_cluster, tmp_path, DAYS[0], None).accumulators["savepoint_path"]
    live_in, live_out = str(tmp_path / "live_events"), str(tmp_path / "live")
    # the live table starts a day early (its day 1 is in the daily savepoint already), in commits of half a day
    commits = [a for _ in range(7) for a in live_events.append(live_in, N // 2, N, start_day=DAYS[0])]
    start = running_totals.live_starting_version(live_in, DAYS[1], day1)
    assert start == next(a.version for a in commits if a.day == DAYS[1])  # the first commit of day 2
    env = live_env(day1, str(tmp_path / "savepoints"))
    running_totals.build_live(env, live_in, DAYS[1], live_out, start, checkpoint_interval_ms=200, discovery_interval_ms=100)
    client = mini_cluster.submit(env.get_job_graph(running_totals.live_job_name(DAYS[1])))
    try:
        wait_until(lambda: _days_out(live_out, "2026-01-02", "2026-01-03"), timeout=60, what="live days 2 and 3 in the output")
        stopped = savepoint(mini_cluster, client.job_id, stop=True)
        assert stopped.status == "COMPLETED", stopped.failure
    finally:
        client.cancel()
    assert stopped.location is not None
    # appended while no job reads the table; the restored job reads on from the savepoint's positions
    live_events.append(live_in, 2 * N + N // 2, N)
    assert running_totals.live_starting_version(live_in, DAYS[1], stopped.location) is None  # the savepoint's positions
    env = live_env(stopped.location)
    running_totals.build_live(env, live_in, DAYS[1], live_out, None, checkpoint_interval_ms=200, discovery_interval_ms=100)
    client = mini_cluster.submit(env.get_job_graph(running_totals.live_job_name(DAYS[1])))
    try:
        wait_until(lambda: _days_out(live_out, "2026-01-04", "2026-01-05"), timeout=60, what="live days 4 and 5 in the output")
    finally:
        client.cancel()
    seen = totals_by_user_day(live_out)  # fails on a (user, day) written twice
    days = sorted({d for _, d in seen})
    assert days[:4] == ["2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05"], days  # nothing of day 1 from the live job
    for day, expected in expected_by_day(days, N).items():
        assert {u: t for (u, d), t in seen.items() if d == day} == expected, day
