"""Operator state as a Spark DataFrame (Flink's State Processor API, over Delta, read by Spark SQL).

The same rows and columns as `runtime.storage.state_reader.read_keyed_state`, built with Spark SQL
over the checkpoint or savepoint table (`spark.read.format("delta")`, delta-spark): no Python UDFs.
Each of key / namespace / value is the one physical column its rows use (e.g. `value_long`, or
`value_tuple`, a list of struct<long, double, string, bytes>: `value[0].long`), or a struct of the
physical columns when they are mixed; pickled values stay binary (decode them with the pyarrow reader).
"""
from __future__ import annotations

from typing import Any

from runtime.core.errors import StorageError
from runtime.storage.state_reader import PHYSICAL, resolve_checkpoint


def read_keyed_state_df(spark: Any, path: str, operator_id: str, state_name: str | None = None, checkpoint_id: int | None = None) -> Any:
    from pyspark.sql import functions as F

    meta = resolve_checkpoint(path, checkpoint_id)  # the newest committed checkpoint, from the Delta log
    df = spark.read.format("delta").load(path).where(
        (F.col("checkpoint_id") == meta.checkpoint_id) & (F.col("operator_id") == operator_id) & (F.col("kind") == "keyed")
    )
    base = spark.read.format("delta").load(path).where((F.col("checkpoint_id") == meta.checkpoint_id) & (F.col("operator_id") == operator_id))
    if base.where(F.col("kind") == "native").limit(1).count():
        raise StorageError(
            f"checkpoint {meta.checkpoint_id} at {path} holds the keyed state of operator {operator_id!r} in RocksDB's native "
            "format, which Spark SQL does not read: take a savepoint (canonical: `millrace savepoint JOB`) and read that, "
            "or read this checkpoint with runtime.storage.state_reader.read_keyed_state (pyarrow)"
        )
    if state_name is not None:
        df = df.where(F.col("state_name") == state_name)
    physical = [c for cols in PHYSICAL.values() for c in cols if c in df.columns]
    counts = df.select([F.count(F.col(c)).alias(c) for c in physical]).first().asDict()  # non-null rows per column
    selected = [F.col("key_group"), F.col("state_name"), F.col("state_kind")]
    for prefix, cols in PHYSICAL.items():
        used = [c for c in cols if counts.get(c)]
        if not used:
            selected.append(F.lit(None).alias(prefix))
        elif len(used) == 1:
            selected.append(F.col(used[0]).alias(prefix))
        else:
            selected.append(F.struct(*[F.col(c).alias(c.split("_", 1)[1]) for c in used]).alias(prefix))
    return df.select(*selected)
