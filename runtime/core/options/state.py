"""State backends: which one holds keyed state, where RocksDB keeps its files, how checkpoints
become incremental (the changelog) and where a snapshot is written (Flink's StateBackendOptions,
RocksDBOptions, StateChangelogOptions).

`StateBackendSettings.from_config` is the one parser of the family: the API reads a program's
state backend from it, and a keyed operator creates its backend from it. Where a snapshot is
written (state.snapshot.async-mode) is read with the task's settings (runtime.core.options.task).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.config_options import ConfigOptions

TITLE = "State backends"

STATE_BACKEND_TYPES = ("hashmap", "rocksdb")  # runtime.state.BACKEND_KINDS
SNAPSHOT_ASYNC_MODES = ("auto", "fork", "thread")
DEFAULT_FORK_THRESHOLD_BYTES = 256 << 10
DEFAULT_MATERIALIZE_INTERVAL_MS = 10 * 60 * 1000  # Flink's default
DEFAULT_MAX_LOG_BYTES = 256 << 20

STATE_BACKEND = (
    ConfigOptions.key("state.backend.type")
    .enum_type(STATE_BACKEND_TYPES, what="state backend", aliases={"heap": "hashmap", "memory": "hashmap", "filesystem": "hashmap", "rocks": "rocksdb"})
    .no_default_value()
    .with_deprecated_keys("state.backend")
    .with_description(
        "Where keyed state lives while a job runs: hashmap (Python objects in the TaskManager's memory) "
        "or rocksdb (an embedded RocksDB on the TaskManager's disk). Unset: hashmap."
    )
)

INCREMENTAL_CHECKPOINTS = (
    ConfigOptions.key("state.backend.incremental").boolean_type().no_default_value()
    .with_description(
        "RocksDB: checkpoints write a changelog of the writes since the last completed checkpoint over "
        "a periodically materialized native checkpoint (as state.changelog.enabled); false: every "
        "checkpoint is a full native one."
    )
)

ROCKSDB_LOCAL_DIRECTORY = (
    ConfigOptions.key("state.backend.rocksdb.localdir").string_type().no_default_value()
    .with_description("The local folder of RocksDB's files. Unset: a temporary folder per operator.")
)

CHANGELOG_ENABLED = (
    ConfigOptions.key("state.changelog.enabled").boolean_type().no_default_value()
    .with_description("Checkpoint keyed state incrementally through a changelog (Flink's changelog state backend). Unset: false.")
)

PERIODIC_MATERIALIZE_INTERVAL = (
    ConfigOptions.key("state.changelog.periodic-materialize.interval").duration_type()
    .default_value(DEFAULT_MATERIALIZE_INTERVAL_MS)
    .check(lambda ms: ms > 0, "a positive duration")
    .with_description("How often the changelog is folded into a full (materialized) snapshot.")
)

MAX_LOG_SIZE = (
    ConfigOptions.key("state.changelog.max-log-size").memory_type().default_value(DEFAULT_MAX_LOG_BYTES)
    .check(lambda n: n > 0, "a positive size")
    .with_description(
        "Millrace: a changelog larger than this is materialized early, which bounds the replay of a restore."
    )
)

SNAPSHOT_ASYNC_MODE = (
    ConfigOptions.key("state.snapshot.async-mode").enum_type(SNAPSHOT_ASYNC_MODES, what="snapshot mode").no_default_value()
    .with_description(
        "Millrace: where a snapshot's asynchronous part runs. fork: a forked child writes the state "
        "file from its copy-on-write image (its own core, no GIL shared with the task); thread: a "
        "thread of the task's process; auto: fork when the task's last state file was larger than "
        "state.snapshot.fork-threshold (or it has written none yet), a thread otherwise (a fork costs "
        "the task tens of ms in a large process, however small the state). Unset: auto where the "
        "platform has fork, thread elsewhere."
    )
)

SNAPSHOT_FORK_THRESHOLD = (
    ConfigOptions.key("state.snapshot.fork-threshold").memory_type().default_value(DEFAULT_FORK_THRESHOLD_BYTES)
    .with_description(
        "Millrace, async-mode auto: a task whose last state file was at most this big writes the next "
        "snapshot on a thread instead of forking (0: always fork)."
    )
)


class ChangelogSettings(BaseModel):
    """How a backend checkpoints incrementally."""

    model_config = ConfigDict(frozen=True)

    enabled: bool = False
    materialize_interval_ms: int = Field(default=DEFAULT_MATERIALIZE_INTERVAL_MS, gt=0)
    max_log_bytes: int = Field(default=DEFAULT_MAX_LOG_BYTES, gt=0)

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ChangelogSettings:
        return cls(
            # Flink's RocksDB switch (state.backend.incremental) means incremental checkpoints: here by changelog
            enabled=bool(CHANGELOG_ENABLED.get(config)) or bool(INCREMENTAL_CHECKPOINTS.get(config)),
            materialize_interval_ms=PERIODIC_MATERIALIZE_INTERVAL.get(config),
            max_log_bytes=MAX_LOG_SIZE.get(config),
        )


class StateBackendSettings(BaseModel):
    """The state backend family of one configuration (its one parser)."""

    model_config = ConfigDict(frozen=True)

    backend: str | None = Field(None, description="hashmap or rocksdb; None: not configured (then hashmap)")
    incremental: bool | None = Field(None, description="state.backend.incremental; None: not configured")
    rocksdb_local_dir: str | None = None
    changelog_enabled: bool | None = Field(None, description="state.changelog.enabled; None: not configured")
    changelog: ChangelogSettings = Field(default_factory=ChangelogSettings)

    @property
    def backend_or_default(self) -> str:
        return self.backend or "hashmap"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StateBackendSettings:
        """Raises ConfigurationError naming the key of a malformed value."""
        return cls(
            backend=STATE_BACKEND.get(config),
            incremental=INCREMENTAL_CHECKPOINTS.get(config),
            rocksdb_local_dir=ROCKSDB_LOCAL_DIRECTORY.get(config),
            changelog_enabled=CHANGELOG_ENABLED.get(config),
            changelog=ChangelogSettings.from_config(config),
        )


__all__ = [
    "CHANGELOG_ENABLED",
    "INCREMENTAL_CHECKPOINTS",
    "MAX_LOG_SIZE",
    "PERIODIC_MATERIALIZE_INTERVAL",
    "ROCKSDB_LOCAL_DIRECTORY",
    "SNAPSHOT_ASYNC_MODE",
    "SNAPSHOT_ASYNC_MODES",
    "SNAPSHOT_FORK_THRESHOLD",
    "STATE_BACKEND",
    "STATE_BACKEND_TYPES",
    "ChangelogSettings",
    "StateBackendSettings",
]
