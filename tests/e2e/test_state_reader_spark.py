"""Operator state read with delta-spark: the windowed_sum savepoint's open windows, through the
DataFrame reader and through plain Spark SQL, with the windows already fired into the job's output,
equal the plain-Python partial aggregation: each window once, none missing (a dropped key group fails)."""
from __future__ import annotations

from typing import Any

import pytest

from runtime.deploy.state_reader_spark import read_keyed_state_df
from tests.integration.state.test_state_reader_job import (  # noqa: F401 - windowed_savepoint: fixture
    N,
    assert_state_and_output_are_the_partial_windows,
    fired_windows,
    partial_windows,
    processed_events,
    windowed_savepoint,
)

pytestmark = pytest.mark.e2e


def test_open_windows_through_spark_sql(spark: Any, windowed_savepoint: dict[str, Any]) -> None:  # noqa: F811 - the fixture imported above
    loc, op = windowed_savepoint["location"], windowed_savepoint["window_op"]
    reference = partial_windows(processed_events(loc, windowed_savepoint["source_op"], N))
    df = read_keyed_state_df(spark, loc, op, "__window_panes__")
    fired = fired_windows(windowed_savepoint["output"])
    assert fired, "no window fired before the savepoint: the output half of the check is empty"
    rows = df.selectExpr("key", "namespace", "value[0].long AS c", "value[1].long AS s").collect()
    assert rows
    assert_state_and_output_are_the_partial_windows([(r["key"], r["namespace"], r["c"], r["s"]) for r in rows], fired, reference)
    sql = spark.sql(
        f"""SELECT key_long AS user_id, namespace_long AS window_start, value_tuple[0].long AS c, value_tuple[1].long AS s
            FROM delta.`{loc}` WHERE operator_id = '{op}' AND kind = 'keyed' AND state_name = '__window_panes__'"""
    ).collect()
    assert_state_and_output_are_the_partial_windows([(r["user_id"], r["window_start"], r["c"], r["s"]) for r in sql], fired, reference)
