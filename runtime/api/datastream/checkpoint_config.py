"""CheckpointConfig, checkpoint storage and state backends, mirroring PyFlink's
pyflink.datastream.checkpoint_config / checkpoint_storage / state_backend.

Everything here is a view over the environment's Configuration: setters write Flink's keys
(`execution.checkpointing.*`, `state.checkpoints.dir`, `state.backend.type`), getters read them
through their ConfigOptions (runtime.core.options.checkpointing and .state), so settings given as
a Configuration to `get_execution_environment(configuration)` / `configure()` and settings made
through this API are the same thing. Durations are written as milliseconds; getters also accept
Flink's duration strings ("10 s", "1 min").
"""
from __future__ import annotations

import enum
from typing import Any

from runtime.api.common.configuration import Configuration
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.core.execution_modes import CheckpointingMode
from runtime.core.options import checkpointing as co
from runtime.core.options import state as so
from runtime.core.options.checkpointing import MINIMAL_CHECKPOINT_TIME_MS
from runtime.core.options.state import STATE_BACKEND_TYPES  # noqa: F401 - re-exported from its old home

# the option keys under their old names (declared in runtime.core.options.checkpointing and .state)
CHECKPOINT_INTERVAL_KEY = co.CHECKPOINTING_INTERVAL.key
CHECKPOINT_MODE_KEY = co.CHECKPOINTING_MODE.key
CHECKPOINT_MAX_CONCURRENT_KEY = co.MAX_CONCURRENT_CHECKPOINTS.key
CHECKPOINTS_DIR_KEY = co.CHECKPOINTS_DIRECTORY.key
CHECKPOINT_EXTERNALIZED_RETENTION_KEY = co.EXTERNALIZED_CHECKPOINT_RETENTION.key
STATE_BACKEND_KEY = so.STATE_BACKEND.key
ROCKSDB_LOCAL_DIR_KEY = so.ROCKSDB_LOCAL_DIRECTORY.key
INCREMENTAL_CHECKPOINTS_KEY = so.INCREMENTAL_CHECKPOINTS.key


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
        config.set_string(so.STATE_BACKEND.key, self.TYPE)

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

    def set_db_storage_paths(self, *paths: str) -> EmbeddedRocksDBStateBackend:
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
            config.set(so.INCREMENTAL_CHECKPOINTS, self._incremental)
        if self._db_path:
            config.set(so.ROCKSDB_LOCAL_DIRECTORY, self._db_path)


def state_backend_from_config(config: Configuration) -> StateBackend | None:
    """The state backend a configuration names (state.backend.type, or the older state.backend)."""
    s = so.StateBackendSettings.from_config(config.to_dict())
    if s.backend is None:
        return None
    if s.backend == "hashmap":
        return HashMapStateBackend()
    b = EmbeddedRocksDBStateBackend(s.incremental)
    return b.set_db_storage_paths(s.rocksdb_local_dir) if s.rocksdb_local_dir else b


# -- the checkpoint config ----------------------------------------------------------------------
def _parse_mode(mode: Any, where: str) -> CheckpointingMode:
    """A mode given to the API (a CheckpointingMode, another enum of that name, or its name),
    parsed as the option parses its values; InvalidProgramError naming the call otherwise."""
    if isinstance(mode, CheckpointingMode):
        return mode
    try:
        return co.CHECKPOINTING_MODE.parse(getattr(mode, "name", mode), where)
    except ConfigurationError as e:
        raise InvalidProgramError(str(e)) from None


def _check_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidProgramError(f"{where}: expected an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise InvalidProgramError(f"{where}: must be >= {minimum}, got {value}")
    return value


class CheckpointConfig:
    """PyFlink's CheckpointConfig over an environment's Configuration."""

    # PyFlink's names for the options' defaults
    DEFAULT_MODE = co.CHECKPOINTING_MODE.default
    DEFAULT_TIMEOUT = co.CHECKPOINTING_TIMEOUT.default
    DEFAULT_MIN_PAUSE_BETWEEN_CHECKPOINTS = co.MIN_PAUSE_BETWEEN_CHECKPOINTS.default
    DEFAULT_MAX_CONCURRENT_CHECKPOINTS = co.MAX_CONCURRENT_CHECKPOINTS.default
    DEFAULT_TOLERABLE_CHECKPOINT_FAILURE_NUMBER = co.TOLERABLE_FAILURE_NUMBER.default

    def __init__(self, configuration: Configuration | None = None) -> None:
        self._config = configuration if configuration is not None else Configuration()

    def _get(self, option: Any) -> Any:
        return self._config.get(option)

    # interval and mode -----------------------------------------------------------------------
    def is_checkpointing_enabled(self) -> bool:
        return self.get_checkpoint_interval() > 0

    def get_checkpoint_interval(self) -> int:
        """The checkpoint interval in milliseconds; -1 when checkpointing is disabled."""
        ms = self._get(co.CHECKPOINTING_INTERVAL)
        return ms if ms is not None and ms > 0 else -1  # unset, 0 or Flink's -1: disabled

    def set_checkpoint_interval(self, checkpoint_interval: int) -> CheckpointConfig:
        """Milliseconds between checkpoints; at least 10 ms (enables checkpointing)."""
        if isinstance(checkpoint_interval, bool) or not isinstance(checkpoint_interval, int):
            raise InvalidProgramError(
                f"checkpoint interval: expected milliseconds (int), got {type(checkpoint_interval).__name__} {checkpoint_interval!r}"
            )
        if checkpoint_interval < MINIMAL_CHECKPOINT_TIME_MS:
            raise InvalidProgramError(
                f"checkpoint interval must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms, got {checkpoint_interval} ms "
                f"({co.CHECKPOINTING_INTERVAL.key})"
            )
        self._config.set_integer(co.CHECKPOINTING_INTERVAL.key, checkpoint_interval)
        return self

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._get(co.CHECKPOINTING_MODE)

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode | str) -> CheckpointConfig:
        self._config.set(co.CHECKPOINTING_MODE, _parse_mode(checkpointing_mode, "set_checkpointing_mode()"))
        return self

    # timeout, pause, concurrency, tolerance --------------------------------------------------
    def get_checkpoint_timeout(self) -> int:
        return self._get(co.CHECKPOINTING_TIMEOUT)

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> CheckpointConfig:
        """Milliseconds after which a pending checkpoint is aborted (default 10 min; at least 10 ms)."""
        v = _check_int(checkpoint_timeout, "set_checkpoint_timeout()", MINIMAL_CHECKPOINT_TIME_MS)
        self._config.set_integer(co.CHECKPOINTING_TIMEOUT.key, v)
        return self

    def get_min_pause_between_checkpoints(self) -> int:
        return self._get(co.MIN_PAUSE_BETWEEN_CHECKPOINTS)

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> CheckpointConfig:
        v = _check_int(min_pause_between_checkpoints, "set_min_pause_between_checkpoints()", 0)
        self._config.set_integer(co.MIN_PAUSE_BETWEEN_CHECKPOINTS.key, v)
        return self

    def get_max_concurrent_checkpoints(self) -> int:
        return self._get(co.MAX_CONCURRENT_CHECKPOINTS)

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> CheckpointConfig:
        """Only 1 is supported: Millrace's coordinator runs one checkpoint at a time."""
        v = _check_int(max_concurrent_checkpoints, "set_max_concurrent_checkpoints()", 1)
        if v != 1:
            raise InvalidProgramError(
                f"set_max_concurrent_checkpoints({v}): only 1 concurrent checkpoint is supported "
                f"({co.MAX_CONCURRENT_CHECKPOINTS.key}); use set_min_pause_between_checkpoints() to space them instead"
            )
        self._config.set_integer(co.MAX_CONCURRENT_CHECKPOINTS.key, v)
        return self

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self._get(co.TOLERABLE_FAILURE_NUMBER)

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> CheckpointConfig:
        """Consecutive checkpoint failures tolerated before the job fails over (default 0)."""
        v = _check_int(tolerable_checkpoint_failure_number, "set_tolerable_checkpoint_failure_number()", 0)
        self._config.set_integer(co.TOLERABLE_FAILURE_NUMBER.key, v)
        return self

    # storage ---------------------------------------------------------------------------------
    def set_checkpoint_storage(self, storage: CheckpointStorage | str) -> CheckpointConfig:
        if isinstance(storage, str):
            storage = FileSystemCheckpointStorage(storage)
        if not isinstance(storage, FileSystemCheckpointStorage):
            raise InvalidProgramError(
                f"set_checkpoint_storage(): {type(storage).__name__} is not supported; checkpoints are Delta tables "
                "under a directory: use FileSystemCheckpointStorage(path) or set_checkpoint_storage_dir(path)"
            )
        self._config.set(co.CHECKPOINTS_DIRECTORY, storage.get_checkpoint_path())
        return self

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> CheckpointConfig:
        """Checkpoints of a job go to a Delta table at `<checkpoint_path>/<job id>` (state.checkpoints.dir)."""
        return self.set_checkpoint_storage(FileSystemCheckpointStorage(checkpoint_path))

    def get_checkpoint_storage(self) -> FileSystemCheckpointStorage | None:
        """The configured storage, or None: then the JobManager's default (the warehouse's _checkpoints)."""
        path = self._get(co.CHECKPOINTS_DIRECTORY)
        return FileSystemCheckpointStorage(path) if path else None

    # externalized checkpoints (recorded; see ExternalizedCheckpointRetention) ------------------
    def set_externalized_checkpoint_retention(self, retention: ExternalizedCheckpointRetention) -> CheckpointConfig:
        """Recorded in the job config only: Millrace's checkpoints always outlive the job."""
        if not isinstance(retention, ExternalizedCheckpointRetention):
            try:
                retention = ExternalizedCheckpointRetention[str(getattr(retention, "name", retention)).upper()]
            except KeyError:
                allowed = ", ".join(r.name for r in ExternalizedCheckpointRetention)
                raise InvalidProgramError(
                    f"set_externalized_checkpoint_retention(): unknown retention {retention!r}; use one of {allowed}"
                ) from None
        self._config.set(co.EXTERNALIZED_CHECKPOINT_RETENTION, retention.name)
        return self

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return ExternalizedCheckpointRetention[self._get(co.EXTERNALIZED_CHECKPOINT_RETENTION)]

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

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        if enabled:
            raise InvalidProgramError(
                "enable_unaligned_checkpoints(): unaligned checkpoints are not supported; Millrace aligns barriers "
                "(EXACTLY_ONCE) or does not align them (AT_LEAST_ONCE: set_checkpointing_mode)"
            )
        return self

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        return self

    # validation of a whole configuration (used when a job is compiled) -----------------------
    def validate(self) -> None:
        """Raise ConfigurationError naming the key of a malformed or unsupported execution.checkpointing.*,
        state.checkpoints.* / state.savepoints.* or state.backend* value (their families' one parsers)."""
        config = self._config.to_dict()
        co.CheckpointingSettings.from_config(config)
        so.StateBackendSettings.from_config(config)

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
