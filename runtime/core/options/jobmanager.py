"""The JobMaster's scheduler: how long a job waits for its slots (Flink's JobManagerOptions).

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


__all__ = ["DEFAULT_SLOT_REQUEST_TIMEOUT_S", "SLOT_REQUEST_TIMEOUT"]
