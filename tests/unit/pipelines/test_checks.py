"""Asset checks pass on a good table and fail, saying why, on bad ones."""
from __future__ import annotations

import pyarrow as pa
import pytest
from dagster import build_asset_check_context
from deltalake import write_deltalake

from pipelines.checks import row_count_result, schema_result, table_checks, unique_keys_result
from pipelines.definitions import asset_checks
from pipelines.tables import USER_MINUTE_TOTALS, WINDOWED_SUM
from resources import DeltaWarehouseResource

pytestmark = pytest.mark.unit


def _good(n: int = 6) -> pa.Table:
    return pa.table({c: pa.array(list(range(n)), pa.int64()) for c in WINDOWED_SUM.columns})


def test_row_count():
    assert row_count_result(5).passed
    assert not row_count_result(0).passed
    assert row_count_result(5, expected=5).passed
    bad = row_count_result(4, expected=5)
    assert not bad.passed and bad.metadata["rows_written_by_job"].value == 5


def test_schema():
    assert schema_result(_good().schema, WINDOWED_SUM.schema).passed
    missing = schema_result(_good().drop_columns(["sum"]).schema, WINDOWED_SUM.schema)
    assert not missing.passed and missing.metadata["missing_columns"].value == "sum"
    extra = schema_result(_good().append_column("x", pa.array([0] * 6)).schema, WINDOWED_SUM.schema)
    assert not extra.passed and extra.metadata["unexpected_columns"].value == "x"
    wrong = schema_result(_good().set_column(2, "count", pa.array([0.5] * 6)).schema, WINDOWED_SUM.schema)
    assert not wrong.passed and "count" in wrong.metadata["wrong_types"].value


def test_unique_keys():
    assert unique_keys_result(_good(), WINDOWED_SUM.key_columns).passed
    dup = pa.concat_tables([_good(), _good(2)])
    res = unique_keys_result(dup, WINDOWED_SUM.key_columns)
    assert not res.passed
    assert res.metadata["duplicate_keys"].value == 2 and res.metadata["duplicate_rows"].value == 4
    assert len(res.metadata["examples"].value) == 2
    assert not unique_keys_result(_good().drop_columns(["window_start"]), WINDOWED_SUM.key_columns).passed


def _run_checks(warehouse: DeltaWarehouseResource, spec) -> dict[str, bool]:
    from pipelines.assets import user_minute_totals, windowed_sum_table

    key = windowed_sum_table.key if spec is WINDOWED_SUM else user_minute_totals.key
    out = {}
    for check in table_checks(key, spec):
        (check_key,) = check.check_keys
        ctx = build_asset_check_context(resources={"warehouse": warehouse})
        with ctx.op_execution_context:  # tears the resources down at once, not at interpreter exit
            out[check_key.name] = check(ctx).passed
    return out


def test_checks_on_delta_tables(tmp_path):
    wh = DeltaWarehouseResource(base_path=str(tmp_path))
    # no table yet: every check fails
    assert _run_checks(wh, WINDOWED_SUM) == {"row_count": False, "schema": False, "no_duplicate_keys": False}
    write_deltalake(wh.table_path("windowed_sum"), _good())
    assert _run_checks(wh, WINDOWED_SUM) == {"row_count": True, "schema": True, "no_duplicate_keys": True}
    write_deltalake(wh.table_path("windowed_sum"), _good(2), mode="append")  # duplicates keys 0 and 1
    assert _run_checks(wh, WINDOWED_SUM) == {"row_count": True, "schema": True, "no_duplicate_keys": False}
    bad_schema = pa.table({"user_id": [1], "minute_start": [1], "windows": [1], "count": [1], "total": [1]})
    write_deltalake(wh.table_path("user_minute_totals"), bad_schema)
    assert _run_checks(wh, USER_MINUTE_TOTALS) == {"row_count": True, "schema": False, "no_duplicate_keys": True}


def test_every_table_asset_has_its_three_checks():
    names = sorted((k.asset_key.to_user_string(), k.name) for c in asset_checks for k in c.check_keys)
    assert names == sorted(
        (a, n) for a in ("windowed_sum_table", "user_minute_totals") for n in ("row_count", "schema", "no_duplicate_keys")
    )
