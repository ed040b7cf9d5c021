"""The savepoint backfill in-process on embedded clusters with local-process TaskManagers: days
of running_totals in order, each restored from the day before's savepoint; results against an
independent count over the generator; the registry; re-materialising a day; a day whose
previous day has no savepoint or no events; retention."""
from __future__ import annotations

from pathlib import Path

from dagster import DagsterInstance, materialize

from pipelines.daily_totals import daily_events, running_totals
from pipelines.live import dispose_old
from pipelines.savepoint_registry import SavepointRegistry
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource
from tests.running_totals_support import day_rows as rows_of_day
from tests.running_totals_support import expected_for_day

N = 100_000  # the default events per day


def _resources(base: Path) -> dict:
    return {
        "millrace": MillraceClusterResource(provider="local", spark=SparkResource(), progress_interval_s=2.0),
        "warehouse": DeltaWarehouseResource(base_path=str(base)),
    }


def materialize_day(base: Path, day: str, instance: DagsterInstance, raise_on_error: bool = True):
    return materialize([daily_events, running_totals], partition_key=day, resources=_resources(base), instance=instance, raise_on_error=raise_on_error)


def day_rows(base: Path, day: str) -> dict[int, tuple[int, int]]:
    return rows_of_day(str(base / "running_totals"), day)


def expected(day: str) -> dict[int, tuple[int, int]]:
    return expected_for_day(day, N)


def test_days_in_order_carry_the_totals_and_a_rerun_is_the_same(tmp_path: Path) -> None:
    instance = DagsterInstance.ephemeral()
    # a day whose previous day has no savepoint fails, naming that day
    failed = materialize_day(tmp_path, "2026-01-02", instance, raise_on_error=False)
    assert not failed.success
    failure = next(e for e in failed.all_events if e.event_type_value == "STEP_FAILURE")
    assert "previous partition 2026-01-01 has no savepoint" in failure.step_failure_data.user_failure_data.description

    for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
        result = materialize_day(tmp_path, day, instance)
        checks = result.get_asset_check_evaluations()
        assert [c.check_name for c in checks] == ["totals_carry_forward"] and checks[0].passed, checks
        meta = {k: v.value for k, v in result.asset_materializations_for_node("running_totals")[0].metadata.items()}
        assert meta["millrace_status"] == "FINISHED" and meta["state_bytes"] > 0 and meta["rows"] == len(expected(day))
    # the acceptance: day 3's rows are the totals over all three days' events
    assert day_rows(tmp_path, "2026-01-03") == expected("2026-01-03")

    registry = SavepointRegistry(DeltaWarehouseResource(base_path=str(tmp_path)))
    entries = {e.partition: e for e in registry.entries("running_totals")}
    assert set(entries) == {"2026-01-01", "2026-01-02", "2026-01-03"}
    assert all("running-totals" in e.operator_ids and e.state_bytes > 0 and Path(e.path).is_dir() for e in entries.values())

    # re-materialising day 2 gives the same rows; its old savepoint is replaced and disposed
    before = {d: day_rows(tmp_path, d) for d in entries}
    assert materialize_day(tmp_path, "2026-01-02", instance).success
    assert {d: day_rows(tmp_path, d) for d in entries} == before
    again = registry.lookup("running_totals", "2026-01-02")
    assert again.path != entries["2026-01-02"].path and not Path(entries["2026-01-02"].path).exists()
    assert len(registry.entries("running_totals")) == 3

    # a day whose events were never materialized fails, naming that partition, and writes nothing
    missing = materialize([running_totals], partition_key="2026-01-04", resources=_resources(tmp_path), instance=instance, raise_on_error=False)
    assert not missing.success
    failure = next(e for e in missing.all_events if e.event_type_value == "STEP_FAILURE")
    assert "no events for day 2026-01-04 (materialize daily_events for 2026-01-04 first)" in failure.step_failure_data.user_failure_data.description
    assert day_rows(tmp_path, "2026-01-04") == {} and len(registry.entries("running_totals")) == 3

    # retention: the newest 2 stay (day 2's new savepoint is the newest of all)
    disposed = dispose_old(registry, 2, _Log())
    assert len(disposed) == 1 and not Path(disposed[0]).exists()
    assert {e.partition for e in registry.entries("running_totals")} == {"2026-01-02", "2026-01-03"}


class _Log:
    def info(self, msg: str) -> None:
        pass

    def warning(self, msg: str) -> None:
        raise AssertionError(msg)
