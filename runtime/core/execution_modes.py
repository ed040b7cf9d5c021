"""The two mode enums of Flink's flink-core that configuration options take as values.

They sit apart from runtime.core.checkpoint and the API so the option declarations
(runtime.core.options) can name them without importing either.
"""
from __future__ import annotations

import enum


class CheckpointingMode(str, enum.Enum):
    """PyFlink's CheckpointingMode."""

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


class RuntimeExecutionMode(str, enum.Enum):
    """STREAMING, BATCH, or AUTOMATIC (BATCH iff every source is bounded)."""

    STREAMING = "STREAMING"
    BATCH = "BATCH"
    AUTOMATIC = "AUTOMATIC"


__all__ = ["CheckpointingMode", "RuntimeExecutionMode"]
