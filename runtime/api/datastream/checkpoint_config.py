"""CheckpointConfig, checkpoint storage and state backends, mirroring PyFlink's
pyflink.datastream.checkpoint_config / checkpoint_storage / state_backend.

Everything here is a view over the environment's Configuration: setters write Flink's keys
(`execution.checkpointing.*`, `state.checkpoints.dir`, `state.backend.type`), getters read them,
so settings given as a Configuration to `get_execution_environment(configuration)` /
`configure()` and settings made through this API are the same thing. Durations are written as
milliseconds; getters also accept Flink's duration strings ("10 s", "1 min").
"""
from __future__ import annotations

import enum
from typing import Any

from runtime.api.common.configuration import Configuration
from runtime.core.checkpoint import (
    CHECKPOINT_INTERVAL_KEY,
    CHECKPOINT_MAX_CONCURRENT_KEY,
    CHECKPOINT_MIN_PAUSE_KEY,
    CHECKPOINT_MODE_KEY,
    CHECKPOINT_TIMEOUT_KEY,
    CHECKPOINT_TOLERABLE_FAILURES_KEY,
    CHECKPOINTS_DIR_KEY,
    STATE_BACKEND_KEY,
    CheckpointingMode,
)
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.core.durations import parse_duration_ms

CHECKPOINT_EXTERNALIZED_RETENTION_KEY = "execution.checkpointing.externalized-checkpoint-retention"
ROCKSDB_LOCAL_DIR_KEY = "state.backend.rocksdb.localdir"  # read by runtime.api.operators.runtime_context
INCREMENTAL_CHECKPOINTS_KEY = "state.backend.incremental"

MINIMAL_CHECKPOINT_TIME_MS = 10  # Flink's CheckpointConfig.MINIMAL_CHECKPOINT_TIME
STATE_BACKEND_TYPES = ("hashmap", "rocksdb")  # runtime.state.BACKEND_KINDS


class ExternalizedCheckpointRetention(enum.Enum):
    """What happens to the retained checkpoints when the job is canceled (Flink 1.20's name).

    Millrace keeps checkpoints in a Delta table under `state.checkpoints.dir` and never deletes
    the newest completed ones on its own when a job ends, so the setting is recorded in the job
    config (execution.checkpointing.externalized-checkpoint-retention) for the checkpoint store
    and has no further effect.
    """

    DELETE_ON_CANCELLATION = 0
    RETAIN_ON_CANCELLATION = 1
    NO_EXTERNALIZED_CHECKPOINTS = 2


ExternalizedCheckpointCleanup = ExternalizedCheckpointRetention  # PyFlink's older name


# -- checkpoint storage -------------------------------------------------------------------------
class CheckpointStorage:
    """Where checkpoints go (PyFlink's CheckpointStorage)."""


class FileSystemCheckpointStorage(CheckpointStorage):
    """Checkpoints under a directory: Millrace commits them to a Delta table at `<path>/<job id>`."""

    def __init__(self, checkpoint_path: str) -> None:
        if not isinstance(checkpoint_path, str) or not checkpoint_path.strip():
            raise InvalidProgramError(
                f"FileSystemCheckpointStorage(): checkpoint_path must be a non-empty path or URI, got {checkpoint_path!r}"
            )
        self._path = checkpoint_path.strip()

    def get_checkpoint_path(self) -> str:
        return self._path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FileSystemCheckpointStorage) and other._path == self._path

    def __hash__(self) -> int:
        return hash(self._path)

    def __repr__(self) -> str:
        return f"FileSystemCheckpointStorage({self._path!r})"


# -- state backends -----------------------------------------------------------------------------
class StateBackend:
    """Where keyed state lives while the job runs (PyFlink's StateBackend); `state.backend.type`."""

    TYPE = ""

    def _apply(self, config: Configuration) -> None:
        config.set_string(STATE_BACKEND_KEY, self.TYPE)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash(self.TYPE)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HashMapStateBackend(StateBackend):
    """State as Python objects in the TaskManager's memory (state.backend.type: hashmap)."""

    TYPE = "hashmap"


class EmbeddedRocksDBStateBackend(StateBackend):
    """State in an embedded RocksDB (rocksdict) on the TaskManager's disk (state.backend.type: rocksdb).

    `enable_incremental_checkpointing` (state.backend.incremental): checkpoints write a changelog of
    the writes since the last completed checkpoint over a periodically materialized native
    checkpoint (runtime.state.changelog); off: every checkpoint is a full native RocksDB one.
    """

    TYPE = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool | None = None) -> None:
        self._incremental = enable_incremental_checkpointing
        self._db_path: str | None = None

    def set_db_storage_paths(self, *paths: str) -> "EmbeddedRocksDBStateBackend":
        """The local directory for RocksDB files (state.backend.rocksdb.localdir); one path is supported."""
        if len(paths) > 1:
            raise InvalidProgramError(
                f"set_db_storage_paths(): Millrace supports one local RocksDB directory per TaskManager, got {list(paths)}"
            )
        self._db_path = paths[0] if paths else None
        return self

    def get_db_storage_paths(self) -> list[str]:
        return [self._db_path] if self._db_path else []

    def is_incremental_checkpoints_enabled(self) -> bool:
        return bool(self._incremental)

    def _apply(self, config: Configuration) -> None:
        super()._apply(config)
        if self._incremental is not None:
            config.set_boolean(INCREMENTAL_CHECKPOINTS_KEY, self._incremental)
        if self._db_path:
            config.set_string(ROCKSDB_LOCAL_DIR_KEY, self._db_path)


def state_backend_from_config(config: Configuration) -> StateBackend | None:
    """The state backend a configuration names (state.backend.type, or the older state.backend)."""
    raw = config.get_string(STATE_BACKEND_KEY) or config.get_string("state.backend")
    if raw is None or not raw.strip():
        return None
    kind = raw.strip().lower()
    if kind in ("hashmap", "heap", "memory", "filesystem"):
        return HashMapStateBackend()
    if kind in ("rocksdb", "rocks"):
        b = EmbeddedRocksDBStateBackend(config.get_boolean(INCREMENTAL_CHECKPOINTS_KEY) if INCREMENTAL_CHECKPOINTS_KEY in config else None)
        local = config.get_string(ROCKSDB_LOCAL_DIR_KEY)
        return b.set_db_storage_paths(local) if local else b
    raise ConfigurationError(f"{STATE_BACKEND_KEY}: unknown state backend {raw!r}; use one of {', '.join(STATE_BACKEND_TYPES)}")


# -- the checkpoint config ----------------------------------------------------------------------
def _parse_mode(mode: Any, where: str) -> CheckpointingMode:
    if isinstance(mode, CheckpointingMode):
        return mode
    raw = getattr(mode, "name", mode)
    try:
        return CheckpointingMode(str(raw).strip().upper().replace("-", "_"))
    except ValueError:
        allowed = ", ".join(m.value for m in CheckpointingMode)
        raise InvalidProgramError(f"{where}: unknown checkpointing mode {mode!r}; use one of {allowed}") from None


def _check_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidProgramError(f"{where}: expected an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise InvalidProgramError(f"{where}: must be >= {minimum}, got {value}")
    return value


class CheckpointConfig:
    """PyFlink's CheckpointConfig over an environment's Configuration."""

    DEFAULT_MODE = CheckpointingMode.EXACTLY_ONCE
    DEFAULT_TIMEOUT = 10 * 60 * 1000
    DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS = 0
    DEFAULT_MAX_CONCURRENT_CHECKPOINTS = 1
    DEFAULT_TOLERABLE_CHECKPOINT_FAILURE_NUMBER = 0

    def __init__(self, configuration: Configuration | None = None) -> None:
        self._config = configuration if configuration is not None else Configuration()

    # reading ---------------------------------------------------------------------------------
    def _duration(self, key: str, default: int) -> int:
        raw = self._config.get_string(key)
        if raw is None or not raw.strip():
            return default
        try:
            return parse_duration_ms(raw)
        except ConfigurationError as e:
            raise ConfigurationError(f"{key}: {e}") from None

    def _int(self, key: str, default: int) -> int:
        raw = self._config.get_string(key)
        if raw is None or not raw.strip():
            return default
        try:
            return int(raw.strip())
        except ValueError:
            raise ConfigurationError(f"{key}: {raw!r} is not an integer") from None

    # interval and mode -----------------------------------------------------------------------
    def is_checkpointing_enabled(self) -> bool:
        return self.get_checkpoint_interval() > 0

    def get_checkpoint_interval(self) -> int:
        """The checkpoint interval in milliseconds; -1 when checkpointing is disabled."""
        raw = self._config.get_string(CHECKPOINT_INTERVAL_KEY)
        if raw is None or not raw.strip() or raw.strip().startswith("-"):
            return -1  # unset, or Flink's -1: disabled
        ms = self._duration(CHECKPOINT_INTERVAL_KEY, -1)
        return ms if ms > 0 else -1

    def set_checkpoint_interval(self, checkpoint_interval: int) -> "CheckpointConfig":
        """Milliseconds between checkpoints; at least 10 ms (enables checkpointing)."""
        if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int):
            raise InvalidProgramError(
                f"checkpoint interval: expected milliseconds (int), got {type(checkpoint_interval).__name__} {checkpoint_interval!r}"
            )
        if checkpoint_interval < MINIMAL_CHECKPOINT_TIME_MS:
            raise InvalidProgramError(
                f"checkpoint interval must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms, got {checkpoint_interval} ms "
                f"({CHECKPOINT_INTERVAL_KEY})"
            )
        self._config.set_integer(CHECKPOINT_INTERVAL_KEY, checkpoint_interval)
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        raw = self._config.get_string(CHECKPOINT_MODE_KEY)
        if raw is None or not raw.strip():
            return self.DEFAULT_MODE
        return _parse_mode(raw, CHECKPOINT_MODE_KEY)

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode | str) -> "CheckpointConfig":
        self._config.set_string(CHECKPOINT_MODE_KEY, _parse_mode(checkpointing_mode, "set_checkpointing_mode()").value)
        return self

    # timeout, pause, concurrency, tolerance --------------------------------------------------
    def get_checkpoint_timeout(self) -> int:
        return self._duration(CHECKPOINT_TIMEOUT_KEY, self.DEFAULT_TIMEOUT)

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> "CheckpointConfig":
        """Milliseconds after which a pending checkpoint is aborted (default 10 min; at least 10 ms)."""
        v = _check_int(checkpoint_timeout, "set_checkpoint_timeout()", MINIMAL_CHECKPOINT_TIME_MS)
        self._config.set_integer(CHECKPOINT_TIMEOUT_KEY, v)
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return self._duration(CHECKPOINT_MIN_PAUSE_KEY, self.DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS)

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> "CheckpointConfig":
        v = _check_int(min_pause_between_checkpoints, "set_min_pause_between_checkpoints()", 0)
        self._config.set_integer(CHECKPOINT_MIN_PAUSE_KEY, v)
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self._int(CHECKPOINT_MAX_CONCURRENT_KEY, self.DEFAULT_MAX_CONCURRENT_CHECKPOINTS)

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> "CheckpointConfig":
        """Only 1 is supported: Millrace's coordinator runs one checkpoint at a time."""
        v = _check_int(max_concurrent_checkpoints, "set_max_concurrent_checkpoints()", 1)
        if v != 1:
            raise InvalidProgramError(
                f"set_max_concurrent_checkpoints({v}): only 1 concurrent checkpoint is supported "
                f"({CHECKPOINT_MAX_CONCURRENT_KEY}); use set_min_pause_between_checkpoints() to space them instead"
            )
        self._config.set_integer(CHECKPOINT_MAX_CONCURRENT_KEY, v)
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self._int(CHECKPOINT_TOLERABLE_FAILURES_KEY, self.DEFAULT_TOLERABLE_CHECKPOINT_FAILURE_NUMBER)

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> "CheckpointConfig":
        """Consecutive checkpoint failures tolerated before the job fails over (default 0)."""
        v = _check_int(tolerable_checkpoint_failure_number, "set_tolerable_checkpoint_failure_number()", 0)
        self._config.set_integer(CHECKPOINT_TOLERABLE_FAILURES_KEY, v)
        return self

    # storage ---------------------------------------------------------------------------------
    def set_checkpoint_storage(self, storage: CheckpointStorage | str) -> "CheckpointConfig":
        if isinstance(storage, str):
            storage = FileSystemCheckpointStorage(storage)
        if not isinstance(storage, FileSystemCheckpointStorage):
            raise InvalidProgramError(
                f"set_checkpoint_storage(): {type(storage).__name__} is not supported; checkpoints are Delta tables "
                "under a directory: use FileSystemCheckpointStorage(path) or set_checkpoint_storage_dir(path)"
            )
        self._config.set_string(CHECKPOINTS_DIR_KEY, storage.get_checkpoint_path())
        return self

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> "CheckpointConfig":
        """Checkpoints of a job go to a Delta table at `<checkpoint_path>/<job id>` (state.checkpoints.dir)."""
        return self.set_checkpoint_storage(FileSystemCheckpointStorage(checkpoint_path))

    def get_checkpoint_storage(self) -> FileSystemCheckpointStorage | None:
        """The configured storage, or None: then the JobManager's default (the warehouse's _checkpoints)."""
        path = self._config.get_string(CHECKPOINTS_DIR_KEY)
        return FileSystemCheckpointStorage(path) if path and path.strip() else None

    # externalized checkpoints (recorded; see ExternalizedCheckpointRetention) ------------------
    def set_externalized_checkpoint_retention(self, retention: ExternalizedCheckpointRetention) -> "CheckpointConfig":
        """Recorded in the job config only: Millrace's checkpoints always outlive the job."""
        if not isinstance(retention, ExternalizedCheckpointRetention):
            try:
                retention = ExternalizedCheckpointRetention[str(getattr(retention, "name", retention)).upper()]
            except KeyError:
                allowed = ", ".join(r.name for r in ExternalizedCheckpointRetention)
                raise InvalidProgramError(
                    f"set_externalized_checkpoint_retention(): unknown retention {retention!r}; use one of {allowed}"
                ) from None
        self._config.set_string(CHECKPOINT_EXTERNALIZED_RETENTION_KEY, retention.name)
        return self

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        raw = self._config.get_string(CHECKPOINT_EXTERNALIZED_RETENTION_KEY)
        if raw is None or not raw.strip():
            return ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
        try:
            return ExternalizedCheckpointRetention[raw.strip().upper()]
        except KeyError:
            allowed = ", ".join(r.name for r in ExternalizedCheckpointRetention)
            raise ConfigurationError(f"{CHECKPOINT_EXTERNALIZED_RETENTION_KEY}: unknown value {raw!r}; use one of {allowed}") from None

    # PyFlink's older names
    set_externalized_checkpoint_cleanup = set_externalized_checkpoint_retention
    enable_externalized_checkpoints = set_externalized_checkpoint_retention

    def get_externalized_checkpoint_cleanup(self) -> ExternalizedCheckpointRetention | None:
        r = self.get_externalized_checkpoint_retention()
        return None if r is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS else r

    def is_externalized_checkpoints_enabled(self) -> bool:
        return self.get_externalized_checkpoint_retention() is not ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS

    # unaligned checkpoints are not implemented -----------------------------------------------
    def is_unaligned_checkpoints_enabled(self) -> bool:
        return False

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> "CheckpointConfig":
        if enabled:
            raise InvalidProgramError(
                "enable_unaligned_checkpoints(): unaligned checkpoints are not supported; Millrace aligns barriers "
                "(EXACTLY_ONCE) or does not align them (AT_LEAST_ONCE: set_checkpointing_mode)"
            )
        return self

    def disable_unaligned_checkpoints(self) -> "CheckpointConfig":
        return self

    # validation of a whole configuration (used when a job is compiled) -----------------------
    def validate(self) -> None:
        """Raise on a malformed or unsupported execution.checkpointing.* / state.* value."""
        interval = self._config.get_string(CHECKPOINT_INTERVAL_KEY)
        ms = self.get_checkpoint_interval()
        if interval is not None:
            if 0 < ms < MINIMAL_CHECKPOINT_TIME_MS:
                raise ConfigurationError(
                    f"{CHECKPOINT_INTERVAL_KEY}: {interval!r} is too short; the interval must be at least "
                    f"{MINIMAL_CHECKPOINT_TIME_MS} ms (or unset to disable checkpointing)"
                )
        raw_mode = self._config.get_string(CHECKPOINT_MODE_KEY)
        if raw_mode is not None and raw_mode.strip():
            try:
                _parse_mode(raw_mode, CHECKPOINT_MODE_KEY)
            except InvalidProgramError as e:
                raise ConfigurationError(str(e)) from None
        if self.get_checkpoint_timeout() < MINIMAL_CHECKPOINT_TIME_MS:
            raise ConfigurationError(f"{CHECKPOINT_TIMEOUT_KEY}: must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms")
        self.get_min_pause_between_checkpoints()
        if self.get_max_concurrent_checkpoints() != 1:
            raise ConfigurationError(
                f"{CHECKPOINT_MAX_CONCURRENT_KEY}: only 1 concurrent checkpoint is supported, got "
                f"{self._config.get_string(CHECKPOINT_MAX_CONCURRENT_KEY)!r}"
            )
        if self.get_tolerable_checkpoint_failure_number() < 0:
            raise ConfigurationError(f"{CHECKPOINT_TOLERABLE_FAILURES_KEY}: must be >= 0")
        self.get_externalized_checkpoint_retention()
        state_backend_from_config(self._config)

    def __repr__(self) -> str:
        return (
            f"CheckpointConfig(interval={self.get_checkpoint_interval()}, mode={self.get_checkpointing_mode().value}, "
            f"timeout={self.get_checkpoint_timeout()}, storage={self.get_checkpoint_storage()})"
        )


__all__ = [
    "CheckpointConfig",
    "CheckpointStorage",
    "CheckpointingMode",
    "EmbeddedRocksDBStateBackend",
    "ExternalizedCheckpointCleanup",
    "ExternalizedCheckpointRetention",
    "FileSystemCheckpointStorage",
    "HashMapStateBackend",
    "StateBackend",
    "state_backend_from_config",
]
