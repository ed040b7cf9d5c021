"""The JobMaster's scheduler: which one, and how long a job waits for its slots (Flink's JobManagerOptions).

The failover strategy, also one of Flink's JobManagerOptions, is with the restart strategies
(runtime.core.options.restart): the two decide a failure together.
"""
from __future__ import annotations

from runtime.core.config_options import ConfigOptions

TITLE = "JobManager"

DEFAULT_SLOT_REQUEST_TIMEOUT_S = 60.0

SLOT_REQUEST_TIMEOUT = (
    ConfigOptions.key("slot.request.timeout.s").float_type().default_value(DEFAULT_SLOT_REQUEST_TIMEOUT_S)
    .check(lambda s: s > 0, "a positive number of seconds")
    .with_description(
        "Seconds a job waits for the slots it needs (TaskManagers being started included) before it "
        "fails with the reason it could not get them (Flink's slot.request.timeout, in seconds)."
    )
)

SCHEDULER = (
    ConfigOptions.key("jobmanager.scheduler").enum_type(("default", "adaptive"), what="scheduler").default_value("default")
    .with_description(
        "default: a job runs at the parallelism it was submitted with (region failover, adaptive batch, "
        "speculative execution). adaptive (a streaming job's parallelism following its slots) is not "
        "built yet: a streaming job that asks for it is refused at submission, naming this key."
    )
)

SCHEDULER_MODE = (
    ConfigOptions.key("scheduler-mode").enum_type(("none", "reactive"), what="scheduler mode").default_value("none")
    .with_description(
        "reactive (Flink's reactive mode: the adaptive scheduler with every slot of the cluster) is not "
        "built yet: a streaming job that asks for it is refused at submission, naming this key."
    )
)

__all__ = [
    "DEFAULT_SLOT_REQUEST_TIMEOUT_S",
    "SCHEDULER",
    "SCHEDULER_MODE",
    "SLOT_REQUEST_TIMEOUT",
]
