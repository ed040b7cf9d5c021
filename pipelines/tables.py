"""The Delta tables the code location produces: name in the warehouse, schema, key columns."""
from dataclasses import dataclass

import pyarrow as pa

from pipelines.jobs import user_minute_totals, windowed_sum


@dataclass(frozen=True)
class TableSpec:
    name: str  # table name in the DeltaWarehouseResource (also the asset's default location)
    schema: pa.Schema  # exact columns and types the job writes
    key_columns: tuple[str, ...]  # unique per row

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.schema.names)


WINDOWED_SUM = TableSpec(
    name="windowed_sum",
    schema=pa.schema([pa.field(c, pa.int64()) for c in windowed_sum.OUTPUT_COLUMNS]),
    key_columns=("user_id", "window_start"),
)

USER_MINUTE_TOTALS = TableSpec(
    name="user_minute_totals",
    schema=pa.schema([pa.field(c, pa.int64()) for c in user_minute_totals.OUTPUT_COLUMNS]),
    key_columns=user_minute_totals.KEY_COLUMNS,
)
