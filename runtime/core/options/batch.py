"""Batch execution: parallelism decided from the data, speculative execution of slow tasks, and
where blocking results go (Flink's BatchExecutionOptions and SlowTaskDetectorOptions).

The scheduler's AdaptiveBatchOptions (runtime.jobmanager.scheduler.adaptive_batch) and
SpeculativeOptions (runtime.jobmanager.scheduler.speculative) are read from these options.
"""
from __future__ import annotations

from runtime.core.config_options import ConfigOptions

TITLE = "Batch execution"

DEFAULT_AVG_DATA_VOLUME = 16 * 1024 * 1024  # Flink's default: 16 mb

ADAPTIVE_AUTO_PARALLELISM_ENABLED = (
    ConfigOptions.key("execution.batch.adaptive.auto-parallelism.enabled").boolean_type().default_value(True)
    .with_description(
        "BATCH: a vertex whose parallelism the program did not set gets it from the bytes its "
        "blocking inputs hold, once they are committed."
    )
)

ADAPTIVE_AVG_DATA_VOLUME_PER_TASK = (
    ConfigOptions.key("execution.batch.adaptive.auto-parallelism.avg-data-volume-per-task").memory_type()
    .default_value(DEFAULT_AVG_DATA_VOLUME)
    .check(lambda n: n > 0, "a positive size")
    .with_description("Adaptive parallelism: the input bytes one subtask should read (input bytes / this, rounded up).")
)

ADAPTIVE_MIN_PARALLELISM = (
    ConfigOptions.key("execution.batch.adaptive.auto-parallelism.min-parallelism").int_type().default_value(1)
    .check(lambda n: n >= 1, "at least 1")
    .with_description("Adaptive parallelism: the least parallelism decided.")
)

ADAPTIVE_MAX_PARALLELISM = (
    ConfigOptions.key("execution.batch.adaptive.auto-parallelism.max-parallelism").int_type().no_default_value()
    .check(lambda n: n >= 1, "at least 1")
    .with_description(
        "Adaptive parallelism: the most parallelism decided. Unset: the vertex's configured parallelism "
        "(the job's default parallelism); never above its max parallelism (key groups)."
    )
)

SPECULATIVE_ENABLED = (
    ConfigOptions.key("execution.batch.speculative.enabled").boolean_type().default_value(False)
    .with_description(
        "BATCH: a subtask much slower than its finished siblings gets another attempt on another "
        "TaskManager; the first attempt to finish wins."
    )
)

SPECULATIVE_MAX_CONCURRENT_EXECUTIONS = (
    ConfigOptions.key("execution.batch.speculative.max-concurrent-executions").int_type().default_value(2)
    .with_description("Attempts of one subtask running at once, the first included (at least 2).")
)

BLOCK_SLOW_NODE_DURATION = (
    ConfigOptions.key("execution.batch.speculative.block-slow-node-duration").duration_type().default_value(60_000)
    .with_description("How long the TaskManager of a slow task gets no new attempts.")
)

SLOW_TASK_DETECTOR_CHECK_INTERVAL = (
    ConfigOptions.key("slow-task-detector.check-interval").duration_type().default_value(1_000)
    .with_description("How often running batch tasks are checked for slowness.")
)

SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_LOWER_BOUND = (
    ConfigOptions.key("slow-task-detector.execution-time.baseline-lower-bound").duration_type().default_value(60_000)
    .with_description("A task is never slow before it ran this long.")
)

SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_MULTIPLIER = (
    ConfigOptions.key("slow-task-detector.execution-time.baseline-multiplier").float_type().default_value(1.5)
    .with_description("A task is slow once it ran this many times the median time of its finished siblings (at least 1).")
)

SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_RATIO = (
    ConfigOptions.key("slow-task-detector.execution-time.baseline-ratio").float_type().default_value(0.75)
    .with_description("Share of a vertex's subtasks that must have finished before any of the others counts as slow (0 to 1].")
)

BLOCKING_RESULTS_DIRECTORY = (
    ConfigOptions.key("execution.batch.blocking-results.dir").string_type().no_default_value()
    .with_description(
        "Base of blocking results: a job's results are Delta tables under <dir>/<job id>. Unset: the "
        "warehouse's _blocking folder ($MILLRACE_WAREHOUSE, else ./warehouse)."
    )
)


__all__ = [
    "ADAPTIVE_AUTO_PARALLELISM_ENABLED",
    "ADAPTIVE_AVG_DATA_VOLUME_PER_TASK",
    "ADAPTIVE_MAX_PARALLELISM",
    "ADAPTIVE_MIN_PARALLELISM",
    "BLOCKING_RESULTS_DIRECTORY",
    "BLOCK_SLOW_NODE_DURATION",
    "DEFAULT_AVG_DATA_VOLUME",
    "SLOW_TASK_DETECTOR_CHECK_INTERVAL",
    "SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_LOWER_BOUND",
    "SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_MULTIPLIER",
    "SLOW_TASK_DETECTOR_EXECUTION_TIME_BASELINE_RATIO",
    "SPECULATIVE_ENABLED",
    "SPECULATIVE_MAX_CONCURRENT_EXECUTIONS",
]
