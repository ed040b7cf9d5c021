"""The JobMaster's scheduler: which one, how long a job waits for its slots, and the adaptive
scheduler's timing (Flink's JobManagerOptions).

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
        "speculative execution). adaptive: a streaming job's parallelism follows the slots it gets, between "
        "its lower and upper bounds (1 and its configured parallelism, or the resource requirements set "
        "through REST); it scales down when slots are lost and up when slots appear. Batch jobs keep the "
        "default scheduler."
    )
)

SCHEDULER_MODE = (
    ConfigOptions.key("scheduler-mode").enum_type(("none", "reactive"), what="scheduler mode").default_value("none")
    .with_description(
        "reactive: the adaptive scheduler with every slot of the cluster (Flink's reactive mode): each vertex "
        "runs at up to its max parallelism, as far as the cluster's slots go, scaling up when TaskManagers are "
        "added (millrace cluster scale) and down when they go; the job never starts TaskManagers itself. "
        "Implies jobmanager.scheduler: adaptive."
    )
)
RESOURCE_WAIT_TIMEOUT = (
    ConfigOptions.key("jobmanager.adaptive-scheduler.resource-wait-timeout").duration_type(minus_one=True).no_default_value()
    .with_description(
        "How long the adaptive scheduler waits for the slots of its minimum parallelism (at the start and "
        "after a restart) before the job fails, naming what it needed and had. -1: forever. Unset: 5 min, "
        "and forever in reactive mode (Flink's defaults)."
    )
)

RESOURCE_STABILIZATION_TIMEOUT = (
    ConfigOptions.key("jobmanager.adaptive-scheduler.resource-stabilization-timeout").duration_type().default_value(10_000)
    .with_description(
        "Once its minimum is there, how long the adaptive scheduler waits for more slots (each arriving slot "
        "starts the wait again) before it runs with what it has; it runs at once when its upper bound is reached."
    )
)

SCALING_INTERVAL_MIN = (
    ConfigOptions.key("jobmanager.adaptive-scheduler.scaling-interval.min").duration_type().default_value(30_000)
    .with_description("The least time between a job's start or last rescale and a scale-up (a cooldown); lost slots and new resource requirements do not wait.")
)

MIN_PARALLELISM_INCREASE = (
    ConfigOptions.key("jobmanager.adaptive-scheduler.min-parallelism-increase").int_type().default_value(1)
    .check(lambda n: n >= 1, "an int >= 1")
    .with_description("A running job scales up only when the sum of its vertices' parallelism would grow by at least this much.")
)


__all__ = [
    "DEFAULT_SLOT_REQUEST_TIMEOUT_S",
    "MIN_PARALLELISM_INCREASE",
    "RESOURCE_STABILIZATION_TIMEOUT",
    "RESOURCE_WAIT_TIMEOUT",
    "SCALING_INTERVAL_MIN",
    "SCHEDULER",
    "SCHEDULER_MODE",
    "SLOT_REQUEST_TIMEOUT",
]
