"""The savepoint backfill as a user runs it, with TaskManagers on Spark executors (the code
location's defaults: embedded cluster, local Spark, 100,000 events per day):

- `dagster asset materialize -m pipelines.definitions --select daily_events,running_totals
  --partition 2026-01-0X` for X = 1, 2 in order leaves day 2's rows equal to the totals over
  both days' events (an independent count over the generator);
- a backfill of 2026-01-01..2026-01-02 launched through GraphQL (launchPartitionBackfill, as the
  UI's "Materialize all" with a range) on `dagster dev` runs the days in order, one after the
  other, and gives the same rows (its TaskManagers are local processes, set in the backfill's
  run config: the order is what it shows);
- a backfill can be resumed after a failed day: a backfill of 2026-01-03 launched next to it, too
  early, fails with a message naming the missing partition (day 2 has no savepoint yet);
  re-executing it from failure (the UI's "Re-execute from failure", GraphQL
  reexecutePartitionBackfill) runs day 3 restored from day 2's savepoint, and its rows are the
  totals over all three days.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.e2e.backfill_daemon_interval.sitecustomize import MARKER
from tests.e2e.test_dagster_ui import DagsterDev
from tests.running_totals_support import day_rows as rows_of_day
from tests.running_totals_support import expected_for_day
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
N = 100_000
TICKS = Path(__file__).resolve().parent / "backfill_daemon_interval"
DAEMON_INTERVAL_S = 2

BACKFILL = """
mutation Backfill($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
    ... on PartitionSetNotFoundError { message }
    ... on InvalidStepError { invalidStepKey }
    ... on InvalidOutputError { stepKey invalidOutputName }
  }
}"""

BACKFILL_STATUS = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status runs(limit: 50) { runId status startTime endTime tags { key value } assetSelection { path } } }
    ... on PythonError { message }
  }
}"""


REEXECUTE = """
mutation Reexecute($params: ReexecutionParams!) {
  reexecutePartitionBackfill(reexecutionParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message stack }
  }
}"""

FINAL = ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED")


def expected(day: str) -> dict[int, tuple[int, int]]:
    return expected_for_day(day, N)


def day_rows(warehouse: Path, day: str) -> dict[int, tuple[int, int]]:
    return rows_of_day(str(warehouse / "running_totals"), day)


def test_days_in_order_with_the_dagster_cli(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path / "home"), MILLRACE_WAREHOUSE=str(warehouse))
    (tmp_path / "home").mkdir()
    for day in ("2026-01-01", "2026-01-02"):  # each day is a Dagster process starting Spark: two show the carry
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m", "pipelines.definitions",
             "--select", "daily_events,running_totals", "--partition", day],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "totals_carry_forward" in proc.stdout + proc.stderr
    assert day_rows(warehouse, "2026-01-02") == expected("2026-01-02")


@pytest.fixture
def dagster_dev(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """`dagster dev` on infra/dagster.yaml, its daemons quicker to act: the backfill daemon looks at
    the backfills every DAEMON_INTERVAL_S instead of Dagster's fixed 30 s (see
    tests/e2e/backfill_daemon_interval), and the run queue is looked at every second instead of 5 s.
    What a backfill launches, and when it may, is Dagster's logic as before: only sooner after the
    moment it may."""
    home = tmp_path / "home"
    home.mkdir()
    config = yaml.safe_load((ROOT / "infra" / "dagster.yaml").read_text())
    config["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    config["auto_materialize"] = {"minimum_interval_seconds": 30}  # the asset daemon's interval as it was
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(TICKS), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("MILLRACE_TEST_BACKFILL_DAEMON_INTERVAL_S", str(DAEMON_INTERVAL_S))
    server = DagsterDev(home, tmp_path / "warehouse")
    try:
        server.wait_ready()
        wait_until(lambda: f"{MARKER} {DAEMON_INTERVAL_S} s" in server.log_path.read_text(), timeout=60,
                   what="the backfill daemon's shorter interval in the dagster dev log")
        yield server
    finally:
        left = server.stop()
        assert not left, f"processes left behind by dagster dev: {sorted(left)}"


def _launch(server: DagsterDev, days: list[str], assets: list[str], title: str) -> str:
    params = {
        "partitionNames": days,
        "assetSelection": [{"path": [a]} for a in assets],
        "fromFailure": False,
        "title": title,
        # local-process TaskManagers: the CLI test above runs the days on Spark; here the order matters
        "runConfigData": {"resources": {"millrace": {"config": {"provider": "local"}}}},
    }
    out = server.gql(BACKFILL, {"params": params})["launchPartitionBackfill"]
    assert out["__typename"] == "LaunchBackfillSuccess", out
    return out["backfillId"]


def _wait(server: DagsterDev, backfill_id: str, timeout: float = 600) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        server.track()
        backfill = server.gql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]
        if backfill["status"] in FINAL:
            return backfill
        assert time.monotonic() < deadline, backfill
        time.sleep(1)


def _succeeded(server: DagsterDev, backfill: dict) -> list[dict]:
    runs = backfill["runs"]
    assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), [(r["runId"], r["status"]) for r in runs] + [
        server.messages(r["runId"])[-3000:] for r in runs if r["status"] != "SUCCESS"
    ]
    assert runs and all(r["status"] == "SUCCESS" for r in runs)
    return runs


def _totals_runs(runs: list[dict]) -> dict[str, list[dict]]:
    """The runs that materialized running_totals, per day."""
    out: dict[str, list[dict]] = {}
    for r in runs:
        tags = {t["key"]: t["value"] for t in r["tags"]}
        if ["running_totals"] in [a["path"] for a in r["assetSelection"] or []]:
            out.setdefault(tags.get("dagster/partition"), []).append(r)
    return out


def _assert_in_order(per_day: dict[str, list[dict]], days: list[str]) -> None:
    """The run of each day started after the day before's had ended."""
    assert set(per_day) == set(days), per_day.keys()
    for before, after in zip(days, days[1:]):
        assert min(r["startTime"] for r in per_day[after]) >= max(r["endTime"] for r in per_day[before]), (before, after)


def _run_of(server: DagsterDev, backfill_id: str, day: str, statuses: set[str], timeout: float = 300) -> dict:
    """The backfill's running_totals run of `day`, once it has one of `statuses`."""
    deadline = time.monotonic() + timeout
    while True:
        server.track()
        runs = server.gql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]["runs"]
        found = [r for r in _totals_runs(runs).get(day, []) if r["status"] in statuses]
        if found:
            return found[0]
        assert time.monotonic() < deadline, runs
        time.sleep(1)


@pytest.mark.timeout(900)  # backfill daemon ticks launch the days one after the other (every 30 s in a Dagster left as it is)
def test_a_ui_backfill_runs_the_days_in_order_and_resumes_after_a_failed_day(dagster_dev: DagsterDev) -> None:
    # two days in order, and one later day that fails and is resumed (every extra day costs the
    # suite backfill daemon ticks and an embedded cluster's start: the in-order
    # pair is the first backfill's)
    days, later = ["2026-01-01", "2026-01-02"], ["2026-01-03"]
    assets = ["daily_events", "running_totals"]
    first = _launch(dagster_dev, days, assets, "savepoint backfill")
    # launched too early, next to the first: day 3 has no savepoint of day 2 yet, so it fails (while
    # the first backfill runs its days; Dagster waits only for parents inside a backfill)
    early = _launch(dagster_dev, later, assets, "savepoint backfill, launched too early")
    log = dagster_dev.messages(_run_of(dagster_dev, early, later[0], {"FAILURE", "SUCCESS"})["runId"])
    assert "the previous partition 2026-01-02 has no savepoint" in log, log[-3000:]

    runs = _succeeded(dagster_dev, _wait(dagster_dev, first))
    per_day = _totals_runs(runs)
    _assert_in_order(per_day, days)
    assert "embedded cluster (local TaskManagers)" in dagster_dev.messages(per_day[days[0]][0]["runId"])
    for day in days:
        assert day_rows(dagster_dev.warehouse, day) == expected(day)

    failed = _wait(dagster_dev, early)
    assert failed["status"] in ("COMPLETED_FAILED", "FAILED"), failed
    tried = _totals_runs(failed["runs"])
    assert list(tried) == [later[0]] and [r["status"] for r in tried[later[0]]] == ["FAILURE"], tried
    assert day_rows(dagster_dev.warehouse, later[0]) == {}

    # "re-execute from failure": the day not materialized, 3, from day 2's savepoint
    out = dagster_dev.gql(REEXECUTE, {"params": {"parentRunId": early, "strategy": "FROM_FAILURE"}})["reexecutePartitionBackfill"]
    assert out["__typename"] == "LaunchBackfillSuccess", out
    resumed = _totals_runs(_succeeded(dagster_dev, _wait(dagster_dev, out["backfillId"])))
    _assert_in_order(resumed, later)
    for day in days + later:
        assert day_rows(dagster_dev.warehouse, day) == expected(day)
