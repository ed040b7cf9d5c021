"""Restart strategies (whether and when a failed job restarts) and the failover strategy (which
of its tasks restart) (Flink's RestartStrategyOptions and JobManagerOptions.EXECUTION_FAILOVER_STRATEGY).

`RestartStrategySettings.from_config` is the one parser of the family, a pure settings model:
the API reads and validates a program's restart strategy with it, and the JobMaster's failover
module builds its RestartBackoffTimeStrategy and FailoverStrategy from it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.core.config_options import ConfigOptions
from runtime.core.errors import ConfigurationError
from runtime.core.options import checkpointing as checkpointing_options

TITLE = "Restart and failover strategies"

# restart-strategy.type values (Flink's RestartStrategyType) and the other spellings Flink accepts;
# Final, so each is its Literal type where the settings models below name their kind
NO_RESTART: Final = "disable"
FIXED_DELAY: Final = "fixed-delay"
FAILURE_RATE: Final = "failure-rate"
EXPONENTIAL_DELAY: Final = "exponential-delay"
RESTART_STRATEGY_TYPES: dict[str, tuple[str, ...]] = {
    NO_RESTART: ("none", "off", "disable"),
    FIXED_DELAY: ("fixed-delay", "fixeddelay"),
    FAILURE_RATE: ("failure-rate", "failurerate"),
    EXPONENTIAL_DELAY: ("exponential-delay", "exponentialdelay"),
}

# Flink's defaults (RestartStrategyOptions, Flink 1.19+)
DEFAULT_FIXED_DELAY_ATTEMPTS = 1
DEFAULT_FIXED_DELAY_MS = 1_000
DEFAULT_FAILURE_RATE_MAX_FAILURES = 1
DEFAULT_FAILURE_RATE_INTERVAL_MS = 60_000
DEFAULT_FAILURE_RATE_DELAY_MS = 1_000
DEFAULT_EXPONENTIAL_INITIAL_MS = 1_000
DEFAULT_EXPONENTIAL_MAX_MS = 60_000
DEFAULT_EXPONENTIAL_MULTIPLIER = 1.5
DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS = 3_600_000
DEFAULT_EXPONENTIAL_JITTER = 0.1
DEFAULT_EXPONENTIAL_ATTEMPTS = 2**31 - 1  # Integer.MAX_VALUE: "infinite"
# A BATCH job without a restart strategy of its own: 3 restarts 1 s apart (Spark's
# spark.task.maxFailures = 4 attempts). A deviation from Flink, where a job without checkpointing
# never restarts: here a batch job's finished stages are committed to Delta, so a restart re-runs
# only the failed region, and a lost TaskManager should not fail a long batch job.
BATCH_DEFAULT_ATTEMPTS = 3
BATCH_DEFAULT_DELAY_MS = 1_000

FailoverStrategyName = Literal["region", "full"]
FULL_FAILOVER: Final = "full"
REGION_FAILOVER: Final = "region"
FAILOVER_STRATEGIES = (REGION_FAILOVER, FULL_FAILOVER)
DEFAULT_FAILOVER_STRATEGY: Final = REGION_FAILOVER

RESTART_STRATEGY = (
    ConfigOptions.key("restart-strategy.type")
    .enum_type(
        tuple(RESTART_STRATEGY_TYPES), what="restart strategy",
        aliases={s: main for main, spellings in RESTART_STRATEGY_TYPES.items() for s in spellings if s != main},
    )
    .no_default_value()
    .with_deprecated_keys("restart-strategy")
    .with_description(
        "What a job does when a task fails: disable (fail the job), fixed-delay, failure-rate or "
        "exponential-delay. Unset: exponential-delay when checkpointing is on; a BATCH job restarts "
        f"{BATCH_DEFAULT_ATTEMPTS} times {BATCH_DEFAULT_DELAY_MS} ms apart (Millrace, as Spark's task "
        "retries: its finished stages are in Delta); any other job does not restart."
    )
)

FIXED_DELAY_ATTEMPTS = (
    ConfigOptions.key("restart-strategy.fixed-delay.attempts").int_type().default_value(DEFAULT_FIXED_DELAY_ATTEMPTS)
    .check(lambda n: isinstance(n, int) and n >= 0, "an int >= 0")
    .with_description("fixed-delay: restarts before the job fails.")
)

FIXED_DELAY_DELAY = (
    ConfigOptions.key("restart-strategy.fixed-delay.delay").duration_type().default_value(DEFAULT_FIXED_DELAY_MS)
    .check(lambda ms: isinstance(ms, int) and ms >= 0, ">= 0 ms")
    .with_description("fixed-delay: wait between a failure and the restart.")
)

FAILURE_RATE_MAX_FAILURES = (
    ConfigOptions.key("restart-strategy.failure-rate.max-failures-per-interval").int_type()
    .default_value(DEFAULT_FAILURE_RATE_MAX_FAILURES)
    .check(lambda n: isinstance(n, int) and n > 0, "an int greater than 0")
    .with_description("failure-rate: failures within the interval that still restart; one more fails the job.")
)

FAILURE_RATE_INTERVAL = (
    ConfigOptions.key("restart-strategy.failure-rate.failure-rate-interval").duration_type()
    .default_value(DEFAULT_FAILURE_RATE_INTERVAL_MS)
    .check(lambda ms: ms > 0, "greater than 0 ms")
    .with_description("failure-rate: the window failures are counted in.")
)

FAILURE_RATE_DELAY = (
    ConfigOptions.key("restart-strategy.failure-rate.delay").duration_type().default_value(DEFAULT_FAILURE_RATE_DELAY_MS)
    .check(lambda ms: ms >= 0, ">= 0 ms")
    .with_description("failure-rate: wait between a failure and the restart.")
)

EXPONENTIAL_DELAY_INITIAL_BACKOFF = (
    ConfigOptions.key("restart-strategy.exponential-delay.initial-backoff").duration_type()
    .default_value(DEFAULT_EXPONENTIAL_INITIAL_MS)
    .check(lambda ms: ms >= 1, "at least 1 ms")
    .with_description("exponential-delay: the wait before the first restart after a reset.")
)

EXPONENTIAL_DELAY_MAX_BACKOFF = (
    ConfigOptions.key("restart-strategy.exponential-delay.max-backoff").duration_type()
    .default_value(DEFAULT_EXPONENTIAL_MAX_MS)
    .check(lambda ms: ms >= 1, "at least 1 ms")
    .with_description("exponential-delay: the longest wait; at least the initial backoff.")
)

EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER = (
    ConfigOptions.key("restart-strategy.exponential-delay.backoff-multiplier").float_type()
    .default_value(DEFAULT_EXPONENTIAL_MULTIPLIER)
    .check(lambda x: x > 1, "greater than 1")
    .with_description("exponential-delay: each restart waits this many times longer than the one before.")
)

EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD = (
    ConfigOptions.key("restart-strategy.exponential-delay.reset-backoff-threshold").duration_type()
    .default_value(DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS)
    .check(lambda ms: ms >= 1, "at least 1 ms")
    .with_description("exponential-delay: after this long without a failure the backoff starts over.")
)

EXPONENTIAL_DELAY_JITTER_FACTOR = (
    ConfigOptions.key("restart-strategy.exponential-delay.jitter-factor").float_type()
    .default_value(DEFAULT_EXPONENTIAL_JITTER)
    .check(lambda x: 0 <= x <= 1, "between 0 and 1")
    .with_description("exponential-delay: a random share of the backoff added or taken off, so jobs do not restart in step.")
)

EXPONENTIAL_DELAY_ATTEMPTS = (
    ConfigOptions.key("restart-strategy.exponential-delay.attempts-before-reset-backoff").int_type()
    .no_default_value()
    .check(lambda n: isinstance(n, int) and n >= 1, "at least 1")
    .with_description("exponential-delay: restarts between two resets before the job fails. Unset: unlimited.")
)

FAILOVER_STRATEGY = (
    ConfigOptions.key("jobmanager.execution.failover-strategy").enum_type(FAILOVER_STRATEGIES, what="failover strategy")
    .default_value(DEFAULT_FAILOVER_STRATEGY)
    .with_description(
        "Which tasks restart after a failure: region (the failed task's pipelined region, the "
        "producers of inputs that are gone, and every consumer downstream) or full (every task)."
    )
)


# -- the settings model ----------------------------------------------------------------------------
class NoRestartSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["disable"] = NO_RESTART


class FixedDelaySettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["fixed-delay"] = FIXED_DELAY
    attempts: int = DEFAULT_FIXED_DELAY_ATTEMPTS
    delay_ms: int = DEFAULT_FIXED_DELAY_MS

    @model_validator(mode="after")
    def _check(self) -> FixedDelaySettings:
        FIXED_DELAY_ATTEMPTS.validate(self.attempts)
        FIXED_DELAY_DELAY.validate(self.delay_ms)
        return self


class FailureRateSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["failure-rate"] = FAILURE_RATE
    max_failures_per_interval: int = DEFAULT_FAILURE_RATE_MAX_FAILURES
    interval_ms: int = DEFAULT_FAILURE_RATE_INTERVAL_MS
    delay_ms: int = DEFAULT_FAILURE_RATE_DELAY_MS

    @model_validator(mode="after")
    def _check(self) -> FailureRateSettings:
        FAILURE_RATE_MAX_FAILURES.validate(self.max_failures_per_interval)
        FAILURE_RATE_INTERVAL.validate(self.interval_ms)
        FAILURE_RATE_DELAY.validate(self.delay_ms)
        return self


class ExponentialDelaySettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["exponential-delay"] = EXPONENTIAL_DELAY
    initial_ms: int = DEFAULT_EXPONENTIAL_INITIAL_MS
    max_ms: int = DEFAULT_EXPONENTIAL_MAX_MS
    multiplier: float = DEFAULT_EXPONENTIAL_MULTIPLIER
    reset_threshold_ms: int = DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS
    jitter_factor: float = DEFAULT_EXPONENTIAL_JITTER
    attempts_before_reset: int | None = Field(None, description="None: unlimited (Flink: Integer.MAX_VALUE)")

    @model_validator(mode="after")
    def _check(self) -> ExponentialDelaySettings:
        EXPONENTIAL_DELAY_INITIAL_BACKOFF.validate(self.initial_ms)
        EXPONENTIAL_DELAY_MAX_BACKOFF.validate(self.max_ms)
        if self.initial_ms > self.max_ms:
            raise ConfigurationError(
                f"{EXPONENTIAL_DELAY_MAX_BACKOFF.key}: {self.max_ms!r} is not allowed; it must be at least the "
                f"initial backoff ({self.initial_ms} ms)"
            )
        EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER.validate(self.multiplier)
        EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD.validate(self.reset_threshold_ms)
        EXPONENTIAL_DELAY_JITTER_FACTOR.validate(self.jitter_factor)
        if self.attempts_before_reset is not None:
            EXPONENTIAL_DELAY_ATTEMPTS.validate(self.attempts_before_reset)
        return self

    @property
    def attempts_or_unlimited(self) -> int:
        return DEFAULT_EXPONENTIAL_ATTEMPTS if self.attempts_before_reset is None else self.attempts_before_reset


RestartStrategy = NoRestartSettings | FixedDelaySettings | FailureRateSettings | ExponentialDelaySettings


def restart_strategy_from_config(config: Mapping[str, Any]) -> RestartStrategy | None:
    """The restart strategy `config` configures (its restart-strategy.<type>.* options read and
    checked), or None when it sets no restart-strategy.type."""
    kind = RESTART_STRATEGY.get(config)
    if kind is None:
        return None
    if kind == NO_RESTART:
        return NoRestartSettings()
    if kind == FIXED_DELAY:
        return FixedDelaySettings(attempts=FIXED_DELAY_ATTEMPTS.get(config), delay_ms=FIXED_DELAY_DELAY.get(config))
    if kind == FAILURE_RATE:
        return FailureRateSettings(
            max_failures_per_interval=FAILURE_RATE_MAX_FAILURES.get(config),
            interval_ms=FAILURE_RATE_INTERVAL.get(config),
            delay_ms=FAILURE_RATE_DELAY.get(config),
        )
    return ExponentialDelaySettings(
        initial_ms=EXPONENTIAL_DELAY_INITIAL_BACKOFF.get(config),
        max_ms=EXPONENTIAL_DELAY_MAX_BACKOFF.get(config),
        multiplier=EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER.get(config),
        reset_threshold_ms=EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD.get(config),
        jitter_factor=EXPONENTIAL_DELAY_JITTER_FACTOR.get(config),
        attempts_before_reset=EXPONENTIAL_DELAY_ATTEMPTS.get(config),
    )


def checkpointing_enabled(config: Mapping[str, Any]) -> bool:
    """Whether `config` turns periodic checkpoints on (execution.checkpointing.interval > 0): the
    default restart strategy depends on it."""
    return (checkpointing_options.CHECKPOINTING_INTERVAL.get(config) or 0) > 0


class RestartStrategySettings(BaseModel):
    """The restart and failover family of one configuration (its one parser)."""

    model_config = ConfigDict(frozen=True)

    strategy: RestartStrategy | None = Field(None, description="None: restart-strategy.type is not set")
    failover_strategy: FailoverStrategyName = DEFAULT_FAILOVER_STRATEGY
    checkpointing_enabled: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> RestartStrategySettings:
        """Raises ConfigurationError naming the key of a malformed or disallowed value."""
        return cls(
            strategy=restart_strategy_from_config(config),
            # the option's enum_type admits only FAILOVER_STRATEGIES
            failover_strategy=cast(FailoverStrategyName, FAILOVER_STRATEGY.get(config)),
            checkpointing_enabled=checkpointing_enabled(config),
        )

    def effective(self, checkpointing_enabled: bool | None = None, batch: bool = False) -> RestartStrategy:
        """The strategy that applies (Flink's RestartBackoffTimeStrategyFactoryLoader): the one
        configured, else exponential-delay with its defaults when checkpointing is on (Flink 1.19+;
        stray restart-strategy.exponential-delay.* keys do not apply then), else for a BATCH job
        fixed-delay with BATCH_DEFAULT_ATTEMPTS (see above), else no restart."""
        if self.strategy is not None:
            return self.strategy
        if self.checkpointing_enabled if checkpointing_enabled is None else checkpointing_enabled:
            return ExponentialDelaySettings()
        if batch:
            return FixedDelaySettings(attempts=BATCH_DEFAULT_ATTEMPTS, delay_ms=BATCH_DEFAULT_DELAY_MS)
        return NoRestartSettings()


__all__ = [
    "BATCH_DEFAULT_ATTEMPTS",
    "BATCH_DEFAULT_DELAY_MS",
    "DEFAULT_FAILOVER_STRATEGY",
    "EXPONENTIAL_DELAY",
    "FAILOVER_STRATEGIES",
    "FAILOVER_STRATEGY",
    "FAILURE_RATE",
    "FIXED_DELAY",
    "FULL_FAILOVER",
    "NO_RESTART",
    "REGION_FAILOVER",
    "RESTART_STRATEGY",
    "RESTART_STRATEGY_TYPES",
    "ExponentialDelaySettings",
    "FailureRateSettings",
    "FixedDelaySettings",
    "NoRestartSettings",
    "RestartStrategy",
    "RestartStrategySettings",
    "checkpointing_enabled",
    "restart_strategy_from_config",
]
