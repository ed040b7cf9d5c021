"""The table assets materialized with the code location's default: embedded clusters whose
TaskManagers run on Spark executors (SparkResource, the project's session factory); the Delta
tables read back with Spark SQL (delta-spark)."""
from __future__ import annotations

from dagster import materialize

from pipelines.assets import user_minute_totals, windowed_sum_table
from pipelines.definitions import asset_checks
from pipelines.jobs import user_minute_totals as umt_program
from pipelines.jobs import windowed_sum
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource

EVENTS = 30_000


def _spark_jobs(spark) -> int:
    """How many Spark jobs the session has run (Spark numbers them from 0)."""
    tracker = spark.sparkContext.statusTracker()
    known = [j for j in range(5000) if tracker.getJobInfo(j) is not None]
    return max(known) + 1 if known else 0


def test_assets_on_spark_executors(spark, tmp_path):
    spark_resource = SparkResource(master="local[4]")
    resources = {
        "millrace": MillraceClusterResource(mode="embedded", provider="spark", spark=spark_resource),
        "warehouse": DeltaWarehouseResource(base_path=str(tmp_path)),
    }
    jobs_before = _spark_jobs(spark)
    result = materialize(
        [windowed_sum_table, user_minute_totals, *asset_checks], resources=resources,
        run_config={"ops": {"windowed_sum_table": {"config": {"events": EVENTS, "parallelism": 2}}}},
    )
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    # the TaskManagers ran as Spark tasks of the one session (getOrCreate): their Spark jobs are there
    # (one Spark job per TaskManager; nothing else in the run uses Spark)
    assert _spark_jobs(spark) - jobs_before >= 2

    ws = spark.read.format("delta").load(str(tmp_path / "windowed_sum")).collect()
    assert {(r.user_id, r.window_start): (r["count"], r["sum"]) for r in ws} == windowed_sum.reference(EVENTS)
    umt = spark.read.format("delta").load(str(tmp_path / "user_minute_totals")).collect()
    expected = umt_program.reference([r.asDict() for r in ws])
    assert {(r.user_id, r.minute_start): (r.windows, r["count"], r["sum"]) for r in umt} == expected
    meta = result.asset_materializations_for_node("user_minute_totals")[0].metadata
    assert meta["row_count"].value == len(expected) and meta["records_in"].value == len(ws)
