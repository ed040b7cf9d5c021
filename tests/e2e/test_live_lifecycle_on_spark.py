"""The live running_totals lifecycle (the daily backfill, then the live job following the
live_events table that the appender process appends to: start from the last day's savepoint,
scheduled savepoint, SIGKILLed TaskManagers, restore sensor, stop, start from the stop's
savepoint, retention) on a session cluster whose TaskManagers run on Spark executors; the output
checked row for row (see the integration test it reuses)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.cluster.conftest import start_session_cluster, stop_session_cluster
from tests.integration.pipelines.test_live_lifecycle import run_live_lifecycle

pytestmark = pytest.mark.e2e


def test_live_lifecycle_on_spark_task_managers(tmp_path: Path) -> None:
    cluster = start_session_cluster(tmp_path / "home", "--provider", "spark", "--taskmanagers", "2", "--max-taskmanagers", "4")
    try:
        run_live_lifecycle(cluster, tmp_path / "run")
    finally:
        stop_session_cluster(cluster)
