"""The savepoint backfill as a user runs it, with TaskManagers on Spark executors (the code
location's defaults: embedded cluster, local Spark, 100,000 events per day):

- `dagster asset materialize -m pipelines.definitions --select daily_events,running_totals
  --partition 2026-01-0X` for X = 1, 2, 3 in order leaves day 3's rows equal to the totals over
  all three days' events (an independent count over the generator);
- a backfill of 2026-01-01..2026-01-04 launched through GraphQL (launchPartitionBackfill, as the
  UI's "Materialize all" with a range) on `dagster dev` runs the days in order, one after the
  other, and gives the same rows (its TaskManagers are local processes, set in the backfill's
  run config: the order is what it shows).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.running_totals_support import day_rows as rows_of_day
from tests.running_totals_support import expected_for_day
from tests.e2e.test_dagster_ui import DagsterDev

ROOT = Path(__file__).resolve().parents[2]
N = 100_000

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


def expected(day: str) -> dict[int, tuple[int, int]]:
    return expected_for_day(day, N)


def day_rows(warehouse: Path, day: str) -> dict[int, tuple[int, int]]:
    return rows_of_day(str(warehouse / "running_totals"), day)


def test_three_days_with_the_dagster_cli(tmp_path: Path) -> None:
    warehouse = tmp_path / "warehouse"
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path / "home"), MILLRACE_WAREHOUSE=str(warehouse))
    (tmp_path / "home").mkdir()
    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "dagster"), "asset", "materialize", "-m", "pipelines.definitions",
             "--select", "daily_events,running_totals", "--partition", day],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert "totals_carry_forward" in proc.stdout + proc.stderr
    assert day_rows(warehouse, "2026-01-03") == expected("2026-01-03")


@pytest.fixture
def dagster_dev(tmp_path: Path):
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "infra" / "dagster.yaml", home / "dagster.yaml")
    server = DagsterDev(home, tmp_path / "warehouse")
    try:
        server.wait_ready()
        yield server
    finally:
        left = server.stop()
        assert not left, f"processes left behind by dagster dev: {sorted(left)}"


def test_a_ui_backfill_runs_the_days_in_order(dagster_dev: DagsterDev) -> None:
    days = ["2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04"]
    params = {
        "partitionNames": days,
        "assetSelection": [{"path": ["daily_events"]}, {"path": ["running_totals"]}],
        "fromFailure": False,
        "title": "savepoint backfill",
        # local-process TaskManagers: the CLI test above runs the days on Spark; here the order matters
        "runConfigData": {"resources": {"millrace": {"config": {"provider": "local"}}}},
    }
    out = dagster_dev.gql(BACKFILL, {"params": params})["launchPartitionBackfill"]
    assert out["__typename"] == "LaunchBackfillSuccess", out
    deadline = time.monotonic() + 1500
    while True:
        dagster_dev.track()
        backfill = dagster_dev.gql(BACKFILL_STATUS, {"id": out["backfillId"]})["partitionBackfillOrError"]
        if backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"):
            break
        assert time.monotonic() < deadline, backfill
        time.sleep(3)
    runs = backfill["runs"]
    assert backfill["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), [(r["runId"], r["status"]) for r in runs] + [dagster_dev.messages(r["runId"])[-3000:] for r in runs if r["status"] != "SUCCESS"]
    assert runs and all(r["status"] == "SUCCESS" for r in runs)
    # in order: the run that materialized running_totals for a day started after the day before's ended
    totals_runs: dict[str, list[dict]] = {}
    for r in runs:
        tags = {t["key"]: t["value"] for t in r["tags"]}
        if ["running_totals"] in [a["path"] for a in r["assetSelection"] or []]:
            totals_runs.setdefault(tags.get("dagster/partition"), []).append(r)
    assert set(totals_runs) == set(days), totals_runs.keys()
    assert "embedded cluster (local TaskManagers)" in dagster_dev.messages(totals_runs[days[0]][0]["runId"])
    for before, after in zip(days, days[1:]):
        assert min(r["startTime"] for r in totals_runs[after]) >= max(r["endTime"] for r in totals_runs[before]), (before, after)
    for day in days:
        assert day_rows(dagster_dev.warehouse, day) == expected(day)
