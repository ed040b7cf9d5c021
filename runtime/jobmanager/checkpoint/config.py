"""The checkpoint coordinator's configuration: the job config's checkpointing options, parsed by
their one parser (runtime.core.options.checkpointing.CheckpointingSettings), plus the job's table."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field

from runtime.core.execution_modes import CheckpointingMode
from runtime.core.options.checkpointing import DEFAULT_TIMEOUT_MS, CheckpointingSettings

__all__ = ["DEFAULT_TIMEOUT_MS", "CheckpointCoordinatorConfiguration", "default_checkpoints_base"]


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
    def from_config(cls, config: Mapping[str, Any], job_id: str) -> CheckpointCoordinatorConfiguration:
        """Raises ConfigurationError naming the key of a malformed or unsupported value."""
        s = CheckpointingSettings.from_config(config)
        base = s.checkpoints_dir or default_checkpoints_base()
        base = base if "://" in base else os.path.abspath(base)
        return cls(
            interval_ms=s.interval_ms,
            mode=s.mode,
            timeout_ms=s.timeout_ms,
            min_pause_ms=s.min_pause_ms,
            tolerable_failures=s.tolerable_failures,
            max_concurrent=s.max_concurrent,
            table_uri=f"{base.rstrip('/')}/{job_id}",
            num_retained=s.num_retained,
            checkpoints_after_tasks_finish=s.checkpoints_after_tasks_finish,
        )
