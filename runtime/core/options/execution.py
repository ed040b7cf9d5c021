"""How a job executes: its parallelism, runtime mode, operator chaining, buffer timeout and
watermark interval (Flink's CoreOptions, ExecutionOptions and PipelineOptions).

Option modules import other families as modules, never their options by name: the registry
lists the options a module holds as its own.
"""
from __future__ import annotations

from runtime.core.config_options import ConfigOptions
from runtime.core.execution_modes import RuntimeExecutionMode

TITLE = "Execution"

DEFAULT_MAX_PARALLELISM = 128

PARALLELISM = (
    ConfigOptions.key("parallelism.default").int_type().default_value(1)
    .with_description("Parallelism of operators that set none (`millrace run --parallelism`); 0 counts as 1.")
)

MAX_PARALLELISM = (
    ConfigOptions.key("pipeline.max-parallelism").int_type().default_value(DEFAULT_MAX_PARALLELISM)
    .with_description(
        "Key groups of keyed state: the upper bound of a job's parallelism when it is rescaled "
        "from a savepoint. 0 counts as the default."
    )
)

RUNTIME_MODE = (
    ConfigOptions.key("execution.runtime-mode").enum_class(RuntimeExecutionMode, what="runtime mode")
    .default_value(RuntimeExecutionMode.STREAMING)
    .with_description(
        "STREAMING deploys every task at once and exchanges records through pipelined channels; "
        "BATCH runs bounded jobs stage by stage with blocking exchanges in Delta; AUTOMATIC is "
        "BATCH when every source is bounded."
    )
)

OPERATOR_CHAINING = (
    ConfigOptions.key("pipeline.operator-chaining").boolean_type().default_value(True)
    .with_description("Chain operators with forward connections into one task (they then call each other directly).")
)

BUFFER_TIMEOUT = (
    ConfigOptions.key("execution.buffer-timeout").duration_type(minus_one=True).no_default_value()
    .check(lambda ms: ms >= -1, "-1, 0 or a positive duration")
    .with_description(
        "How long records may wait in a network buffer before it is sent: 0 sends after every "
        "record, -1 only full buffers. Unset: the TaskManager's default (100 ms)."
    )
)

AUTO_WATERMARK_INTERVAL = (
    ConfigOptions.key("pipeline.auto-watermark-interval").duration_type().default_value(200)
    .with_description(
        "Interval of periodic watermarks. 0 (Millrace): a watermark after every input batch "
        "instead of none until the end."
    )
)


__all__ = [
    "AUTO_WATERMARK_INTERVAL",
    "BUFFER_TIMEOUT",
    "DEFAULT_MAX_PARALLELISM",
    "MAX_PARALLELISM",
    "OPERATOR_CHAINING",
    "PARALLELISM",
    "RUNTIME_MODE",
]
