"""The savepoint registry: a Delta table `<warehouse>/_savepoints_registry` listing the savepoints
the code location took or knows of, so runs find the one to restore from.

One row per savepoint: job (Millrace job name), partition, path (what `run -s` takes), checkpoint
id, operator ids (every operator of the job that wrote it), state bytes, created_at (UTC), the
Millrace job id that wrote it. Every change is one Delta commit.

- A daily savepoint's partition is the day it closes; a day has at most one row per job
  (re-materialising it replaces the row; the caller disposes the superseded savepoint).
- A live job's savepoints (scheduled, or taken at a stop) have partition `live-from-<first day>`:
  the first day of live events the job was started with, which a restore must use again (its
  source's position counts from there). There may be many.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from resources.warehouse import DeltaWarehouseResource

TABLE = "_savepoints_registry"
LIVE_PREFIX = "live-from-"


def live_partition(first_day: str) -> str:
    return f"{LIVE_PREFIX}{first_day}"
SCHEMA = pa.schema(
    [
        ("job", pa.string()),
        ("partition", pa.string()),
        ("path", pa.string()),
        ("checkpoint_id", pa.int64()),
        ("operator_ids", pa.list_(pa.string())),
        ("state_bytes", pa.int64()),
        ("created_at", pa.timestamp("us", tz="UTC")),
        ("millrace_job_id", pa.string()),
    ]
)


@dataclass(frozen=True)
class SavepointEntry:
    job: str
    partition: str
    path: str
    checkpoint_id: int
    operator_ids: tuple[str, ...]
    state_bytes: int
    created_at: datetime
    millrace_job_id: str

    @staticmethod
    def of(job: str, partition: str, meta: Any) -> SavepointEntry:
        """From a savepoint's CheckpointMetadata (runtime.storage.savepoints.read_savepoint)."""
        return SavepointEntry(
            job=job, partition=partition, path=str(meta.location), checkpoint_id=int(meta.checkpoint_id),
            operator_ids=tuple(sorted(meta.parallelism)), state_bytes=int(meta.state_size),
            created_at=datetime.fromtimestamp((meta.completed_ms or meta.timestamp_ms) / 1000, tz=UTC),
            millrace_job_id=meta.job_id,
        )


class SavepointRegistry:
    def __init__(self, warehouse: DeltaWarehouseResource) -> None:
        self.warehouse = warehouse
        self.path = warehouse.table_path(TABLE)

    def register(self, entry: SavepointEntry) -> SavepointEntry | None:
        """Add `entry`; returns the entry it replaced (same job and day; live savepoints add up)."""
        live = entry.partition.startswith(LIVE_PREFIX)
        old = None if live else self.lookup(entry.job, entry.partition)
        where = {"job": entry.job, "partition": entry.partition}
        if live:
            where["path"] = entry.path
        row = {f: [getattr(entry, f)] for f in SCHEMA.names}
        row["operator_ids"] = [list(entry.operator_ids)]
        self.warehouse.replace_rows(self.path, pa.table(row, schema=SCHEMA), where)
        return old if old is not None and old.path != entry.path else None

    def entries(self, job: str | None = None) -> list[SavepointEntry]:
        """Every entry (of `job`), newest first."""
        if self.warehouse.table_version(self.path) is None:
            return []
        rows = self.warehouse.read_table(self.path).to_pylist()
        out = [
            SavepointEntry(**{**r, "operator_ids": tuple(r["operator_ids"] or ())})
            for r in rows if job is None or r["job"] == job
        ]
        return sorted(out, key=lambda e: (e.created_at, e.checkpoint_id), reverse=True)

    def lookup(self, job: str, partition: str) -> SavepointEntry | None:
        return next((e for e in self.entries(job) if e.partition == partition), None)

    def newest(self, *jobs: str) -> SavepointEntry | None:
        """The newest entry of any of `jobs`."""
        entries = sorted((e for j in jobs for e in self.entries(j)), key=lambda e: (e.created_at, e.checkpoint_id), reverse=True)
        return entries[0] if entries else None

    def remove(self, entry: SavepointEntry) -> None:
        self.warehouse.delete_rows(self.path, {"job": entry.job, "partition": entry.partition, "path": entry.path})
