"""Checkpoints and savepoints: when they are taken, how long they may take, where they go, and
what a job restores from (Flink's CheckpointingOptions, SavepointConfigOptions).

`CheckpointingSettings.from_config` is the one parser of the family: the API's CheckpointConfig
validates a program's settings with it, and the JobMaster's checkpoint coordinator is configured
from it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.config_options import ConfigOptions
from runtime.core.errors import ConfigurationError
from runtime.core.execution_modes import CheckpointingMode

TITLE = "Checkpointing"

MINIMAL_CHECKPOINT_TIME_MS = 10  # Flink's CheckpointConfig.MINIMAL_CHECKPOINT_TIME
DEFAULT_TIMEOUT_MS = 10 * 60 * 1000
# Flink 1.20's ExternalizedCheckpointRetention names; recorded only (see the API's CheckpointConfig)
EXTERNALIZED_RETENTIONS = ("DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION", "NO_EXTERNALIZED_CHECKPOINTS")

CHECKPOINTING_INTERVAL = (
    ConfigOptions.key("execution.checkpointing.interval").duration_type(minus_one=True).no_default_value()
    .with_description(
        "Time between the starts of two periodic checkpoints, at least 10 ms. Unset, 0 or -1: "
        "checkpointing is off."
    )
)

CHECKPOINTING_MODE = (
    ConfigOptions.key("execution.checkpointing.mode").enum_class(CheckpointingMode, what="checkpointing mode")
    .default_value(CheckpointingMode.EXACTLY_ONCE)
    .with_description(
        "EXACTLY_ONCE aligns the barriers of a task's inputs; AT_LEAST_ONCE does not (records after "
        "a barrier may be processed before the snapshot, and replayed after a restore)."
    )
)

CHECKPOINTING_TIMEOUT = (
    ConfigOptions.key("execution.checkpointing.timeout").duration_type().default_value(DEFAULT_TIMEOUT_MS)
    .check(lambda ms: ms >= MINIMAL_CHECKPOINT_TIME_MS, f"at least {MINIMAL_CHECKPOINT_TIME_MS} ms")
    .with_description("A checkpoint that has not completed this long after it was triggered is aborted.")
)

MIN_PAUSE_BETWEEN_CHECKPOINTS = (
    ConfigOptions.key("execution.checkpointing.min-pause").duration_type().default_value(0)
    .with_description("The least time between the end of one checkpoint and the start of the next.")
)

TOLERABLE_FAILURE_NUMBER = (
    ConfigOptions.key("execution.checkpointing.tolerable-failed-checkpoints").int_type().default_value(0)
    .check(lambda n: n >= 0, "an int >= 0")
    .with_description("Checkpoint failures in a row the job tolerates; one more fails the job over.")
)

MAX_CONCURRENT_CHECKPOINTS = (
    ConfigOptions.key("execution.checkpointing.max-concurrent-checkpoints").int_type().default_value(1)
    .with_description("Checkpoints in flight at once. Only 1 is supported: the coordinator runs one at a time.")
)

CHECKPOINTS_AFTER_TASKS_FINISH = (
    ConfigOptions.key("execution.checkpointing.checkpoints-after-tasks-finish").boolean_type().default_value(True)
    .with_deprecated_keys("execution.checkpointing.checkpoints-after-tasks-finish.enabled")
    .with_description(
        "FLIP-147: checkpoints go on once some tasks finished (they are skipped and recorded as "
        "finished). false: no checkpoint is taken after the first task finished."
    )
)

EXTERNALIZED_CHECKPOINT_RETENTION = (
    ConfigOptions.key("execution.checkpointing.externalized-checkpoint-retention")
    .enum_type(EXTERNALIZED_RETENTIONS, what="externalized checkpoint retention")
    .default_value("NO_EXTERNALIZED_CHECKPOINTS")
    .with_description(
        "Recorded in the job config only: Millrace's checkpoints are a Delta table that outlives "
        "the job whatever this says."
    )
)

CHECKPOINTS_DIRECTORY = (
    ConfigOptions.key("state.checkpoints.dir").string_type().no_default_value()
    .with_description(
        "Base of the checkpoint tables: a job's checkpoints are the Delta table <dir>/<job id>. "
        "Unset: the warehouse's _checkpoints folder ($MILLRACE_WAREHOUSE, else ./warehouse)."
    )
)

MAX_RETAINED_CHECKPOINTS = (
    ConfigOptions.key("state.checkpoints.num-retained").int_type().default_value(1)
    .with_description("Completed checkpoints kept; older ones are removed. Below 1 counts as 1 (as Flink does).")
)

SAVEPOINT_DIRECTORY = (
    ConfigOptions.key("state.savepoints.dir").string_type().no_default_value()
    .with_description(
        "Where savepoints go when a request names no target. Unset: <warehouse>/_savepoints/<job name>."
    )
)

SAVEPOINT_PATH = (
    ConfigOptions.key("execution.savepoint.path").string_type().no_default_value()
    .with_description("Restore the job from this savepoint (`millrace run --from-savepoint`).")
)

SAVEPOINT_IGNORE_UNCLAIMED_STATE = (
    ConfigOptions.key("execution.savepoint.ignore-unclaimed-state").boolean_type().default_value(False)
    .with_description(
        "Restore even if the savepoint holds state of operators the program no longer has "
        "(`--allow-non-restored-state`); false fails the job instead."
    )
)

END_OF_INPUT_SAVEPOINT = (
    ConfigOptions.key("execution.end-of-input.savepoint").boolean_type().default_value(False)
    .with_description(
        "Millrace: when every source reached the end of its input, stop with a drained savepoint "
        "(into state.savepoints.dir) instead of finishing, so the state lives on (e.g. the next day's run)."
    )
)


class CheckpointingSettings(BaseModel):
    """The checkpointing family of one configuration, parsed and checked (the family's one parser)."""

    model_config = ConfigDict(frozen=True)

    interval_ms: int = Field(0, description="0: checkpointing off (unset, 0 or -1)")
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    min_pause_ms: int = 0
    tolerable_failures: int = 0
    max_concurrent: int = 1
    checkpoints_after_tasks_finish: bool = True
    externalized_retention: str = "NO_EXTERNALIZED_CHECKPOINTS"
    checkpoints_dir: str | None = None
    num_retained: int = Field(1, description="at least 1")
    savepoints_dir: str | None = None
    savepoint_path: str | None = None
    savepoint_ignore_unclaimed_state: bool = False
    end_of_input_savepoint: bool = False

    @property
    def enabled(self) -> bool:
        return self.interval_ms > 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> CheckpointingSettings:
        """Raises ConfigurationError naming the key of a malformed or unsupported value."""
        interval = CHECKPOINTING_INTERVAL.get(config)
        if interval is not None and 0 < interval < MINIMAL_CHECKPOINT_TIME_MS:
            key, raw = CHECKPOINTING_INTERVAL.find(config) or (CHECKPOINTING_INTERVAL.key, interval)
            raise ConfigurationError(
                f"{key}: {raw!r} is too short; the interval must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms "
                "(or unset to disable checkpointing)"
            )
        max_concurrent = MAX_CONCURRENT_CHECKPOINTS.get(config)
        if max_concurrent != 1:
            raise ConfigurationError(
                f"{MAX_CONCURRENT_CHECKPOINTS.key}: only 1 concurrent checkpoint is supported, got {max_concurrent}; "
                f"space checkpoints with {MIN_PAUSE_BETWEEN_CHECKPOINTS.key} instead"
            )
        return cls(
            interval_ms=max(0, interval or 0),
            mode=CHECKPOINTING_MODE.get(config),
            timeout_ms=CHECKPOINTING_TIMEOUT.get(config),
            min_pause_ms=MIN_PAUSE_BETWEEN_CHECKPOINTS.get(config),
            tolerable_failures=TOLERABLE_FAILURE_NUMBER.get(config),
            max_concurrent=max_concurrent,
            checkpoints_after_tasks_finish=CHECKPOINTS_AFTER_TASKS_FINISH.get(config),
            externalized_retention=EXTERNALIZED_CHECKPOINT_RETENTION.get(config),
            checkpoints_dir=CHECKPOINTS_DIRECTORY.get(config),
            num_retained=max(1, MAX_RETAINED_CHECKPOINTS.get(config)),
            savepoints_dir=SAVEPOINT_DIRECTORY.get(config),
            savepoint_path=SAVEPOINT_PATH.get(config),
            savepoint_ignore_unclaimed_state=SAVEPOINT_IGNORE_UNCLAIMED_STATE.get(config),
            end_of_input_savepoint=END_OF_INPUT_SAVEPOINT.get(config),
        )


__all__ = [
    "CHECKPOINTING_INTERVAL",
    "CHECKPOINTING_MODE",
    "CHECKPOINTING_TIMEOUT",
    "CHECKPOINTS_AFTER_TASKS_FINISH",
    "CHECKPOINTS_DIRECTORY",
    "DEFAULT_TIMEOUT_MS",
    "END_OF_INPUT_SAVEPOINT",
    "EXTERNALIZED_CHECKPOINT_RETENTION",
    "EXTERNALIZED_RETENTIONS",
    "MAX_CONCURRENT_CHECKPOINTS",
    "MAX_RETAINED_CHECKPOINTS",
    "MINIMAL_CHECKPOINT_TIME_MS",
    "MIN_PAUSE_BETWEEN_CHECKPOINTS",
    "SAVEPOINT_DIRECTORY",
    "SAVEPOINT_IGNORE_UNCLAIMED_STATE",
    "SAVEPOINT_PATH",
    "TOLERABLE_FAILURE_NUMBER",
    "CheckpointingSettings",
    "CheckpointingMode",
]
