"""Failover: which subtasks restart after a failure, and whether/when the job may restart at all.

Decisions in the order of Flink's ExecutionFailureHandler:
- a non-recoverable failure (damaged state, a program that does not fit its savepoint) fails the
  job at once, before the restart strategy is asked (`is_unrecoverable_error`);
- a FailoverStrategy picks the subtasks to restart (restart-all, or the pipelined region of the
  failed subtask plus what it depends on and what depends on it);
- a RestartBackoffTimeStrategy says whether another restart is allowed and how long to wait
  (no restart, fixed delay, exponential delay, failure rate).

Pure logic: no I/O, no threads, no sleeping. Time comes from an injected clock (seconds, like
`time.monotonic`), so tests run instantly; all durations here are integer milliseconds.

The options (Flink's RestartStrategyOptions, JobManagerOptions.EXECUTION_FAILOVER_STRATEGY) and
their one parser, the pure RestartStrategySettings model, are in runtime.core.options.restart;
this module builds the strategies from that model.
"""
from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from runtime.core.durations import format_duration_ms, parse_duration_ms  # re-exported (tests, older callers)
from runtime.core.errors import MillraceError, ThrowableType, throwable_type_of
from runtime.core.options import restart as restart_options
from runtime.core.options.restart import (  # noqa: F401 - re-exported: the values and defaults under their old names
    BATCH_DEFAULT_ATTEMPTS,
    BATCH_DEFAULT_DELAY_MS,
    DEFAULT_EXPONENTIAL_ATTEMPTS,
    DEFAULT_EXPONENTIAL_INITIAL_MS,
    DEFAULT_EXPONENTIAL_JITTER,
    DEFAULT_EXPONENTIAL_MAX_MS,
    DEFAULT_EXPONENTIAL_MULTIPLIER,
    DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS,
    DEFAULT_FAILOVER_STRATEGY,
    DEFAULT_FAILURE_RATE_DELAY_MS,
    DEFAULT_FAILURE_RATE_INTERVAL_MS,
    DEFAULT_FAILURE_RATE_MAX_FAILURES,
    DEFAULT_FIXED_DELAY_ATTEMPTS,
    DEFAULT_FIXED_DELAY_MS,
    EXPONENTIAL_DELAY,
    FAILOVER_STRATEGIES,
    FAILURE_RATE,
    FIXED_DELAY,
    FULL_FAILOVER,
    NO_RESTART,
    REGION_FAILOVER,
    RESTART_STRATEGY_TYPES,
    ExponentialDelaySettings,
    FailureRateSettings,
    FixedDelaySettings,
    NoRestartSettings,
    RestartStrategy,
    RestartStrategySettings,
)

if TYPE_CHECKING:
    from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID

Clock = Callable[[], float]  # seconds, e.g. time.monotonic

# the option keys under their old names (declared in runtime.core.options.restart)
RESTART_STRATEGY_TYPE_KEY = restart_options.RESTART_STRATEGY.key
RESTART_STRATEGY_DEPRECATED_KEY = restart_options.RESTART_STRATEGY.deprecated_keys[0]
FIXED_DELAY_ATTEMPTS_KEY = restart_options.FIXED_DELAY_ATTEMPTS.key
FIXED_DELAY_DELAY_KEY = restart_options.FIXED_DELAY_DELAY.key
FAILURE_RATE_MAX_FAILURES_KEY = restart_options.FAILURE_RATE_MAX_FAILURES.key
FAILURE_RATE_INTERVAL_KEY = restart_options.FAILURE_RATE_INTERVAL.key
FAILURE_RATE_DELAY_KEY = restart_options.FAILURE_RATE_DELAY.key
EXPONENTIAL_INITIAL_BACKOFF_KEY = restart_options.EXPONENTIAL_DELAY_INITIAL_BACKOFF.key
EXPONENTIAL_MAX_BACKOFF_KEY = restart_options.EXPONENTIAL_DELAY_MAX_BACKOFF.key
EXPONENTIAL_MULTIPLIER_KEY = restart_options.EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER.key
EXPONENTIAL_RESET_THRESHOLD_KEY = restart_options.EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD.key
EXPONENTIAL_JITTER_KEY = restart_options.EXPONENTIAL_DELAY_JITTER_FACTOR.key
EXPONENTIAL_ATTEMPTS_KEY = restart_options.EXPONENTIAL_DELAY_ATTEMPTS.key
FAILOVER_STRATEGY_KEY = restart_options.FAILOVER_STRATEGY.key


# -- failure classification ---------------------------------------------------------------------
def is_unrecoverable_error(cause: object) -> bool:
    """Whether `cause` must fail the job without a restart (Flink: ExecutionFailureHandler
    .isUnrecoverableError, checked before the restart strategy is consulted).

    `cause` is a failure as the scheduler sees it (an ErrorInfo, whose `throwable_type` the task
    decided from the exception object) or an exception raised on the JobManager itself.
    """
    if isinstance(cause, BaseException):
        return throwable_type_of(cause) is ThrowableType.NON_RECOVERABLE_ERROR
    return getattr(cause, "throwable_type", None) is ThrowableType.NON_RECOVERABLE_ERROR


# -- restart back-off strategies ----------------------------------------------------------------
@runtime_checkable
class RestartBackoffTimeStrategy(Protocol):
    """Flink's RestartBackoffTimeStrategy: call notify_failure, then can_restart / backoff_time_ms."""

    def notify_failure(self, cause: object, timestamp_ms: int | None = None) -> bool:
        """Record a failure that happened at `timestamp_ms` (None: now, by the strategy's clock).

        Timestamps may come from any millisecond clock (e.g. the scheduler's time.time) as long as
        the caller always uses the same one: strategies compare them with each other, and measure
        time passing since the last call with their own clock.

        Returns whether it counts as a new restart attempt (False: merged into a restart that is
        already pending, as Flink's exponential-delay strategy does).
        """
        ...

    def can_restart(self) -> bool: ...

    def backoff_time_ms(self) -> int: ...

    def describe(self) -> str:
        """Human-readable settings, e.g. "fixed-delay (3 attempts, 1000 ms)"; "none" when restarts are off."""
        ...


def _now_ms(clock: Clock) -> int:
    return int(clock() * 1000)


class _CallerTime:
    """Maps the strategy's clock onto the caller's timestamps: the offset between them is taken at
    every notify_failure, so a caller on time.time and a strategy on time.monotonic agree."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.offset_ms = 0

    def observe(self, timestamp_ms: int | None) -> int:
        """The failure time in the caller's domain (now when None); re-anchors the offset."""
        clock_now = _now_ms(self.clock)
        now = clock_now if timestamp_ms is None else int(timestamp_ms)
        self.offset_ms = now - clock_now
        return now

    def now(self) -> int:
        return _now_ms(self.clock) + self.offset_ms


class NoRestartBackoffTimeStrategy:
    """Flink's NoRestartBackoffTimeStrategy: the first failure fails the job."""

    def notify_failure(self, cause: object, timestamp_ms: int | None = None) -> bool:
        return True

    def can_restart(self) -> bool:
        return False

    def backoff_time_ms(self) -> int:
        return 0

    def describe(self) -> str:
        return "none"

    def __repr__(self) -> str:
        return "NoRestartBackoffTimeStrategy()"


class FixedDelayRestartBackoffTimeStrategy:
    """Flink's FixedDelayRestartBackoffTimeStrategy: at most `max_attempts` restarts, `backoff_ms` apart."""

    def __init__(self, max_attempts: int, backoff_ms: int) -> None:
        # the options' rules, also for values that come from code (ConfigurationError naming the key)
        restart_options.FIXED_DELAY_ATTEMPTS.validate(max_attempts)
        restart_options.FIXED_DELAY_DELAY.validate(backoff_ms)
        self.max_attempts = max_attempts
        self.backoff_ms = backoff_ms
        self.failures = 0

    def notify_failure(self, cause: object, timestamp_ms: int | None = None) -> bool:
        self.failures += 1
        return True

    def can_restart(self) -> bool:
        return self.failures <= self.max_attempts

    def backoff_time_ms(self) -> int:
        return self.backoff_ms

    def describe(self) -> str:
        return f"fixed-delay ({self.max_attempts} attempts, {self.backoff_ms} ms)"

    def __repr__(self) -> str:
        return f"FixedDelayRestartBackoffTimeStrategy(max_attempts={self.max_attempts}, backoff_ms={self.backoff_ms})"


class ExponentialDelayRestartBackoffTimeStrategy:
    """Flink's ExponentialDelayRestartBackoffTimeStrategy (1.19+, with attempts-before-reset-backoff).

    The n-th attempt since the last reset waits initial * multiplier**n (capped at max_ms, never
    below initial_ms), plus or minus jitter_factor of it. A failure while a restart is still
    pending is merged into that restart. After reset_threshold_ms without a failure (measured
    from the last scheduled restart) the attempt count starts over. The job fails once more than
    attempts_before_reset restarts happened without a reset.
    """

    def __init__(
        self,
        initial_ms: int = DEFAULT_EXPONENTIAL_INITIAL_MS,
        max_ms: int = DEFAULT_EXPONENTIAL_MAX_MS,
        multiplier: float = DEFAULT_EXPONENTIAL_MULTIPLIER,
        reset_threshold_ms: int = DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS,
        jitter_factor: float = DEFAULT_EXPONENTIAL_JITTER,
        attempts_before_reset: int = DEFAULT_EXPONENTIAL_ATTEMPTS,
        clock: Clock = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        # the settings model checks the options' rules (ConfigurationError naming the key)
        ExponentialDelaySettings(
            initial_ms=initial_ms, max_ms=max_ms, multiplier=multiplier, reset_threshold_ms=reset_threshold_ms,
            jitter_factor=jitter_factor, attempts_before_reset=attempts_before_reset,
        )
        self.initial_ms = int(initial_ms)
        self.max_ms = int(max_ms)
        self.multiplier = float(multiplier)
        self.reset_threshold_ms = int(reset_threshold_ms)
        self.jitter_factor = float(jitter_factor)
        self.attempts_before_reset = int(attempts_before_reset)
        self._time = _CallerTime(clock)
        self._rng = rng if rng is not None else random.Random()
        self.current_attempt = 0
        self._next_restart_ms: int | None = None

    def notify_failure(self, cause: object, timestamp_ms: int | None = None) -> bool:
        now = self._time.observe(timestamp_ms)
        nxt = self._next_restart_ms
        if nxt is not None and now <= nxt:
            return False  # a restart is already pending: one attempt for both failures
        if nxt is None or now - nxt >= self.reset_threshold_ms:
            self.current_attempt = 0
        self._next_restart_ms = now + self._backoff_for(self.current_attempt)
        self.current_attempt += 1
        return True

    def can_restart(self) -> bool:
        return self.current_attempt <= self.attempts_before_reset

    def backoff_time_ms(self) -> int:
        if self._next_restart_ms is None:
            raise MillraceError("backoff_time_ms() before notify_failure(): there is no failure to back off from")
        return max(0, self._next_restart_ms - self._time.now())

    def _backoff_for(self, attempt: int) -> int:
        # Flink: jitter on the uncapped backoff, then clamp to [initial, max]
        try:
            base = self.initial_ms * self.multiplier**attempt
        except OverflowError:
            return self.max_ms
        if not math.isfinite(base):
            return self.max_ms
        current = int(base)
        jitter = 0
        if self.jitter_factor:
            offset = int(current * self.jitter_factor)
            jitter = self._rng.randint(-offset, offset)
        return max(self.initial_ms, min(current + jitter, self.max_ms))

    def describe(self) -> str:
        attempts = "unlimited" if self.attempts_before_reset >= DEFAULT_EXPONENTIAL_ATTEMPTS else str(self.attempts_before_reset)
        return (
            f"exponential-delay ({self.initial_ms} ms initial, x{self.multiplier:g} up to {self.max_ms} ms, "
            f"reset after {self.reset_threshold_ms} ms without failure, jitter {self.jitter_factor:g}, "
            f"{attempts} attempts before reset)"
        )

    def __repr__(self) -> str:
        return f"ExponentialDelayRestartBackoffTimeStrategy({self.describe()}, current_attempt={self.current_attempt})"


class FailureRateRestartBackoffTimeStrategy:
    """Flink's FailureRateRestartBackoffTimeStrategy: restart unless more than
    `max_failures_per_interval` failures happened within `interval_ms`."""

    def __init__(
        self,
        max_failures_per_interval: int = DEFAULT_FAILURE_RATE_MAX_FAILURES,
        interval_ms: int = DEFAULT_FAILURE_RATE_INTERVAL_MS,
        backoff_ms: int = DEFAULT_FAILURE_RATE_DELAY_MS,
        clock: Clock = time.monotonic,
    ) -> None:
        restart_options.FAILURE_RATE_MAX_FAILURES.validate(max_failures_per_interval)
        restart_options.FAILURE_RATE_INTERVAL.validate(interval_ms)
        restart_options.FAILURE_RATE_DELAY.validate(backoff_ms)
        self.max_failures_per_interval = max_failures_per_interval
        self.interval_ms = int(interval_ms)
        self.backoff_ms = int(backoff_ms)
        self._time = _CallerTime(clock)
        # the last max+1 failure times: full means the oldest decides
        self._failures: deque[int] = deque(maxlen=max_failures_per_interval + 1)

    def notify_failure(self, cause: object, timestamp_ms: int | None = None) -> bool:
        self._failures.append(self._time.observe(timestamp_ms))
        return True

    def can_restart(self) -> bool:
        if len(self._failures) <= self.max_failures_per_interval:
            return True
        return self._time.now() - self._failures[0] > self.interval_ms

    def backoff_time_ms(self) -> int:
        return self.backoff_ms

    def describe(self) -> str:
        return (
            f"failure-rate (at most {self.max_failures_per_interval} failures per {self.interval_ms} ms, "
            f"{self.backoff_ms} ms delay)"
        )

    def __repr__(self) -> str:
        return f"FailureRateRestartBackoffTimeStrategy({self.describe()})"


# -- building the strategies from the parsed settings ----------------------------------------
def restart_strategy_type(config: Mapping[str, str]) -> str | None:
    """The main name of the configured restart strategy (disable, fixed-delay, failure-rate,
    exponential-delay), or None when the config sets none."""
    return restart_options.RESTART_STRATEGY.get(config)


def is_checkpointing_enabled(config: Mapping[str, str]) -> bool:
    """Whether the job config enables periodic checkpoints (execution.checkpointing.interval > 0)."""
    return restart_options.checkpointing_enabled(config)


def restart_strategy_from_settings(
    settings: RestartStrategy, clock: Clock = time.monotonic, rng: random.Random | None = None
) -> RestartBackoffTimeStrategy:
    """The RestartBackoffTimeStrategy a parsed restart strategy describes."""
    if isinstance(settings, FixedDelaySettings):
        return FixedDelayRestartBackoffTimeStrategy(settings.attempts, settings.delay_ms)
    if isinstance(settings, FailureRateSettings):
        return FailureRateRestartBackoffTimeStrategy(settings.max_failures_per_interval, settings.interval_ms, settings.delay_ms, clock)
    if isinstance(settings, ExponentialDelaySettings):
        return ExponentialDelayRestartBackoffTimeStrategy(
            settings.initial_ms, settings.max_ms, settings.multiplier, settings.reset_threshold_ms,
            settings.jitter_factor, settings.attempts_or_unlimited, clock, rng,
        )
    return NoRestartBackoffTimeStrategy()


def restart_strategy_from_config(
    config: Mapping[str, str],
    checkpointing_enabled: bool,
    clock: Clock = time.monotonic,
    rng: random.Random | None = None,
    batch: bool = False,
) -> RestartBackoffTimeStrategy:
    """Flink's RestartBackoffTimeStrategyFactoryLoader, for one job config.

    restart-strategy.type (or the deprecated restart-strategy) picks the strategy; with none set,
    a checkpointed job uses exponential-delay with Flink's defaults (Flink 1.19+), a BATCH job
    fixed-delay with BATCH_DEFAULT_ATTEMPTS (a deviation from Flink, see
    runtime.core.options.restart), and any other job does not restart.
    """
    settings = RestartStrategySettings.from_config(config)
    return restart_strategy_from_settings(settings.effective(checkpointing_enabled, batch), clock, rng)


# -- failover strategies ------------------------------------------------------------------------
@runtime_checkable
class FailoverStrategy(Protocol):
    """Flink's FailoverStrategy: the subtasks to restart when `failed` fails."""

    def get_tasks_to_restart(
        self, execution_graph: ExecutionGraph, failed: ExecutionVertexID, cause: object | None = None
    ) -> set[ExecutionVertexID]: ...


class RestartAllFailoverStrategy:
    """Flink's RestartAllFailoverStrategy: every subtask of the job."""

    name = FULL_FAILOVER

    def get_tasks_to_restart(
        self, execution_graph: ExecutionGraph, failed: ExecutionVertexID, cause: object | None = None
    ) -> set[ExecutionVertexID]:
        return {ev.id for ev in execution_graph.all_vertices()}

    def describe(self) -> str:
        return "restart all"


class RestartPipelinedRegionFailoverStrategy:
    """Port of Flink's RestartPipelinedRegionFailoverStrategy (the restart set is runtime.graph.regions').

    The failed subtask's region, the producer regions of its inputs that are no longer available,
    and every consumer region downstream of a restarted region.

    `is_partition_available(partition_id)` is the partition tracker's view (Flink's
    ResultPartitionAvailabilityChecker); by default every partition outside the restarted regions
    is available (committed blocking results survive their producers). A failure whose cause
    carries a `partition_id` (a partition could not be consumed: Flink's PartitionException) marks
    that partition unavailable, so its producer runs again.
    """

    name = REGION_FAILOVER

    def __init__(self, is_partition_available: Callable[[str], bool] | None = None) -> None:
        self._is_available = is_partition_available or (lambda _pid: True)
        self._failed_partitions: set[str] = set()

    def get_tasks_to_restart(
        self, execution_graph: ExecutionGraph, failed: ExecutionVertexID, cause: object | None = None
    ) -> set[ExecutionVertexID]:
        from runtime.graph.regions import region_failover_restart_set

        pid = getattr(cause, "partition_id", None)
        if isinstance(pid, str) and pid:
            self._failed_partitions.add(pid)
        failed_partitions = self._failed_partitions

        def available(partition_id: str) -> bool:
            return partition_id not in failed_partitions and self._is_available(partition_id)

        return region_failover_restart_set(execution_graph, failed, available)

    def clear_failed_partitions(self, partition_ids: set[str] | None = None) -> None:
        """Forget partitions marked unavailable (after their producers ran again)."""
        if partition_ids is None:
            self._failed_partitions.clear()
        else:
            self._failed_partitions -= partition_ids

    def describe(self) -> str:
        return "restart pipelined region"


def failover_strategy_from_config(
    config: Mapping[str, str], is_partition_available: Callable[[str], bool] | None = None
) -> FailoverStrategy:
    """jobmanager.execution.failover-strategy: region (default) or full (Flink's FailoverStrategyFactoryLoader)."""
    return failover_strategy_from_settings(restart_options.FAILOVER_STRATEGY.get(config), is_partition_available)


def failover_strategy_from_settings(
    name: str, is_partition_available: Callable[[str], bool] | None = None
) -> FailoverStrategy:
    """The FailoverStrategy a parsed jobmanager.execution.failover-strategy names."""
    if name == FULL_FAILOVER:
        return RestartAllFailoverStrategy()
    return RestartPipelinedRegionFailoverStrategy(is_partition_available)


__all__ = [
    "DEFAULT_FAILOVER_STRATEGY",
    "EXPONENTIAL_DELAY",
    "FAILOVER_STRATEGY_KEY",
    "FAILURE_RATE",
    "FIXED_DELAY",
    "NO_RESTART",
    "RESTART_STRATEGY_TYPE_KEY",
    "ExponentialDelayRestartBackoffTimeStrategy",
    "FailoverStrategy",
    "FailureRateRestartBackoffTimeStrategy",
    "FixedDelayRestartBackoffTimeStrategy",
    "NoRestartBackoffTimeStrategy",
    "RestartAllFailoverStrategy",
    "RestartBackoffTimeStrategy",
    "RestartPipelinedRegionFailoverStrategy",
    "failover_strategy_from_config",
    "failover_strategy_from_settings",
    "format_duration_ms",
    "is_checkpointing_enabled",
    "is_unrecoverable_error",
    "parse_duration_ms",
    "restart_strategy_from_config",
    "restart_strategy_from_settings",
    "restart_strategy_type",
]
