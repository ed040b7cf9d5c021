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


def test_assets_on_spark_executors(spark, tmp_path):
    spark_resource = SparkResource(master="local[4]")
    resources = {
        "millrace": MillraceClusterResource(mode="embedded", provider="spark", spark=spark_resource),
        "warehouse": DeltaWarehouseResource(base_path=str(tmp_path)),
    }
    result = materialize(
        [windowed_sum_table, user_minute_totals, *asset_checks], resources=resources,
        run_config={"ops": {"windowed_sum_table": {"config": {"events": EVENTS, "parallelism": 2}}}},
    )
    assert result.success
    assert all(e.passed for e in result.get_asset_check_evaluations())
    # the session is the one the fixture started (getOrCreate): one Spark per process
    assert spark_resource.is_started and spark_resource.spark_session.sparkContext.applicationId == spark.sparkContext.applicationId

    ws = spark.read.format("delta").load(str(tmp_path / "windowed_sum")).collect()
    assert {(r.user_id, r.window_start): (r["count"], r["sum"]) for r in ws} == windowed_sum.reference(EVENTS)
    umt = spark.read.format("delta").load(str(tmp_path / "user_minute_totals")).collect()
    expected = umt_program.reference([r.asDict() for r in ws])
    assert {(r.user_id, r.minute_start): (r.windows, r["count"], r["sum"]) for r in umt} == expected
    meta = result.asset_materializations_for_node("user_minute_totals")[0].metadata
    assert meta["row_count"].value == len(expected) and meta["records_in"].value == len(ws)
