"""The checkpoint coordinator's configuration, read from the job config (execution.checkpointing.*)."""
from __future__ import annotations

import os

from pydantic import BaseModel, Field

from runtime.core.checkpoint import (
    CHECKPOINT_INTERVAL_KEY,
    CHECKPOINT_MAX_CONCURRENT_KEY,
    CHECKPOINT_MIN_PAUSE_KEY,
    CHECKPOINT_MODE_KEY,
    CHECKPOINT_TIMEOUT_KEY,
    CHECKPOINT_TOLERABLE_FAILURES_KEY,
    CHECKPOINTS_AFTER_TASKS_FINISH_DEPRECATED_KEYS,
    CHECKPOINTS_AFTER_TASKS_FINISH_KEY,
    CHECKPOINTS_DIR_KEY,
    CHECKPOINTS_RETAINED_KEY,
    CheckpointingMode,
)
from runtime.core.errors import InvalidProgramError

DEFAULT_TIMEOUT_MS = 10 * 60 * 1000


def _duration_ms(config: dict[str, str], key: str, default: int) -> int:
    raw = config.get(key)
    if raw is None or raw == "":
        return default
    from runtime.core.durations import parse_duration_ms

    try:
        return parse_duration_ms(raw)
    except Exception as e:  # noqa: BLE001
        raise InvalidProgramError(f"{key}: {raw!r} is not a duration (e.g. '500 ms', '10 s' or a number of milliseconds)") from e


def _boolean(config: dict[str, str], key: str, deprecated: tuple[str, ...], default: bool) -> bool:
    for k in (key, *deprecated):
        raw = config.get(k)
        if raw is None or str(raw).strip() == "":
            continue
        text = str(raw).strip().lower()
        if text not in ("true", "false"):
            raise InvalidProgramError(f"{k}: {raw!r} is not 'true' or 'false'")
        return text == "true"
    return default


def default_checkpoints_base() -> str:
    """`state.checkpoints.dir` when the job sets none: the local warehouse's _checkpoints folder."""
    warehouse = os.environ.get("MILLRACE_WAREHOUSE") or os.path.join(os.getcwd(), "warehouse")
    return os.path.join(warehouse, "_checkpoints")


class CheckpointCoordinatorConfiguration(BaseModel):
    interval_ms: int = Field(description="0: checkpointing off")
    mode: CheckpointingMode = CheckpointingMode.EXACTLY_ONCE
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    min_pause_ms: int = 0
    tolerable_failures: int = 0
    max_concurrent: int = 1
    table_uri: str = Field(description="the job's checkpoint Delta table: <state.checkpoints.dir>/<job id>")
    num_retained: int = 1
    # FLIP-147: a finished task does not stop checkpoints (it is skipped and recorded as finished)
    checkpoints_after_tasks_finish: bool = True

    @property
    def enabled(self) -> bool:
        return self.interval_ms > 0

    @classmethod
    def from_config(cls, config: dict[str, str], job_id: str) -> "CheckpointCoordinatorConfiguration":
        interval = _duration_ms(config, CHECKPOINT_INTERVAL_KEY, 0)
        mode_raw = (config.get(CHECKPOINT_MODE_KEY) or "EXACTLY_ONCE").upper().replace("-", "_")
        try:
            mode = CheckpointingMode(mode_raw)
        except ValueError:
            raise InvalidProgramError(f"{CHECKPOINT_MODE_KEY}: {mode_raw!r} is not EXACTLY_ONCE or AT_LEAST_ONCE") from None
        max_concurrent = int(config.get(CHECKPOINT_MAX_CONCURRENT_KEY) or 1)
        if max_concurrent != 1:
            raise InvalidProgramError(f"{CHECKPOINT_MAX_CONCURRENT_KEY}: only 1 concurrent checkpoint is supported, got {max_concurrent}")
        base = config.get(CHECKPOINTS_DIR_KEY) or default_checkpoints_base()
        base = base if "://" in base else os.path.abspath(base)
        return cls(
            interval_ms=interval,
            mode=mode,
            timeout_ms=_duration_ms(config, CHECKPOINT_TIMEOUT_KEY, DEFAULT_TIMEOUT_MS),
            min_pause_ms=_duration_ms(config, CHECKPOINT_MIN_PAUSE_KEY, 0),
            tolerable_failures=int(config.get(CHECKPOINT_TOLERABLE_FAILURES_KEY) or 0),
            max_concurrent=max_concurrent,
            table_uri=f"{base.rstrip('/')}/{job_id}",
            num_retained=max(1, int(config.get(CHECKPOINTS_RETAINED_KEY) or 1)),
            checkpoints_after_tasks_finish=_boolean(
                config, CHECKPOINTS_AFTER_TASKS_FINISH_KEY, CHECKPOINTS_AFTER_TASKS_FINISH_DEPRECATED_KEYS, True
            ),
        )
