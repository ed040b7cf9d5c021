"""What a task reads from its job's configuration when it runs on a TaskManager, and how the
TaskManager cancels it (Flink's TaskManagerOptions).

`TaskSettings.from_config` is the one parser of what a task reads: its own options here and the
few of other families it needs (buffer timeout, checkpointing mode and timeout, where snapshots
are written, the end-of-input savepoint). A task parses its deployment's config once, when it is
created.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runtime.core.config_options import ConfigOptions
from runtime.core.execution_modes import CheckpointingMode
from runtime.core.options import checkpointing as checkpointing_options
from runtime.core.options import execution as execution_options
from runtime.core.options import state as state_options

TITLE = "Tasks"

DEFAULT_CANCEL_TIMEOUT_S = 30.0
DEFAULT_CANCEL_INTERVAL_S = 0.5

TASK_CANCELLATION_TIMEOUT = (
    ConfigOptions.key("task.cancellation.timeout.s").float_type().default_value(DEFAULT_CANCEL_TIMEOUT_S)
    .check(lambda s: s > 0, "a positive number of seconds")
    .with_description(
        "Seconds a cancelled task may take to stop before the TaskManager gives its process up "
        "(Flink's task.cancellation.timeout, in seconds)."
    )
)

TASK_CANCELLATION_INTERVAL = (
    ConfigOptions.key("task.cancellation.interval.s").float_type().default_value(DEFAULT_CANCEL_INTERVAL_S)
    .check(lambda s: s > 0, "a positive number of seconds")
    .with_description(
        "Seconds a cancelled task gets to stop by itself before its thread is interrupted, and "
        "between interrupts (Flink's task.cancellation.interval, in seconds)."
    )
)


def _can_fork() -> bool:
    return hasattr(os, "fork")


class TaskSettings(BaseModel):
    """The options one task reads, parsed once from its deployment's config."""

    model_config = ConfigDict(frozen=True)

    buffer_timeout_ms: int | None = Field(None, description="None: the TaskManager's network default")
    checkpointing_mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    checkpoint_timeout_ms: int = checkpointing_options.DEFAULT_TIMEOUT_MS
    snapshot_async_mode: Literal["auto", "fork", "thread"] = Field(
        default_factory=lambda: "auto" if _can_fork() else "thread", description="auto and fork only where os.fork exists"
    )
    fork_threshold_bytes: int = Field(state_options.DEFAULT_FORK_THRESHOLD_BYTES, ge=0)
    end_of_input_savepoint: bool = False
    cancellation_timeout_s: float = DEFAULT_CANCEL_TIMEOUT_S
    cancellation_interval_s: float = DEFAULT_CANCEL_INTERVAL_S

    @property
    def fork_snapshots(self) -> bool:
        """Always fork (mode fork); auto decides per snapshot (`fork_snapshot_of`)."""
        return self.snapshot_async_mode == "fork" and _can_fork()

    def fork_snapshot_of(self, last_state_bytes: int | None) -> bool:
        """Whether the next snapshot forks, given the size of the task's last state file (None: none yet)."""
        if self.snapshot_async_mode == "thread" or not _can_fork():
            return False
        if self.snapshot_async_mode == "fork":
            return True
        return last_state_bytes is None or last_state_bytes > self.fork_threshold_bytes

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TaskSettings:
        """Raises ConfigurationError naming the key of a malformed value."""
        mode = state_options.SNAPSHOT_ASYNC_MODE.get(config) or "auto"
        return cls(
            buffer_timeout_ms=execution_options.BUFFER_TIMEOUT.get(config),
            checkpointing_mode=checkpointing_options.CHECKPOINTING_MODE.get(config),
            checkpoint_timeout_ms=checkpointing_options.CHECKPOINTING_TIMEOUT.get(config),
            snapshot_async_mode=mode if _can_fork() else "thread",
            fork_threshold_bytes=state_options.SNAPSHOT_FORK_THRESHOLD.get(config),
            end_of_input_savepoint=checkpointing_options.END_OF_INPUT_SAVEPOINT.get(config),
            cancellation_timeout_s=TASK_CANCELLATION_TIMEOUT.get(config),
            cancellation_interval_s=TASK_CANCELLATION_INTERVAL.get(config),
        )


__all__ = ["DEFAULT_CANCEL_INTERVAL_S", "DEFAULT_CANCEL_TIMEOUT_S", "TASK_CANCELLATION_INTERVAL", "TASK_CANCELLATION_TIMEOUT", "TaskSettings"]
