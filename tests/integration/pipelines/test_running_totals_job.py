"""The running_totals program on a MiniCluster (local-process TaskManagers): days chained through
end-of-input savepoints, re-running a day, and the live job continuing from the last day's
savepoint; every total is checked against a plain count over the generator."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from pipelines.jobs import running_totals
from pipelines.jobs.daily_events import day_events, reference_totals
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from runtime.storage.delta_read import read_table
from runtime.storage.delta_write import replace_rows
from runtime.storage.savepoints import read_savepoint
from tests.running_totals_support import day_rows, totals_by_user_day
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


def test_the_live_job_continues_the_totals_of_the_last_days_savepoint(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    write_days(str(tmp_path / "events"), DAYS[:1])
    first = run_day(mini_cluster, tmp_path, DAYS[0], None)
    conf = running_totals.configure(first.accumulators["savepoint_path"], None, stop_at_end=False)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(2)
    live_out = str(tmp_path / "live")
    running_totals.build_live(env, "2026-01-02", N, rate=6_000, output=live_out, checkpoint_interval_ms=300)
    client = mini_cluster.submit(env.get_job_graph(running_totals.JOB_NAME + "_live"))
    try:
        # a day of live events takes N / rate = 0.5 s: wait for three whole days in the output
        def days_out() -> set[str] | None:
            try:
                days = set(read_table(live_out, columns=["day"]).column("day").to_pylist())
            except Exception:  # noqa: BLE001 - no table yet
                return None
            return days if {"2026-01-02", "2026-01-03", "2026-01-04"} <= days else None

        wait_until(days_out, timeout=60, what="three live days in the output")
    finally:
        client.cancel()
    seen = totals_by_user_day(live_out)
    day1 = reference_totals(DAYS[0], N)
    reference = {day: reference_totals(day, N) for day in {d for _, d in seen}}
    for (user, day), totals in seen.items():
        assert totals == reference[day][user], (user, day)  # exactly the events through that day
        assert totals >= day1.get(user, (0, 0))
    # every user of a completed live day has a row
    assert {u for (u, d) in seen if d == "2026-01-02"} == set(day_events("2026-01-02", N)["user_id"].tolist())
