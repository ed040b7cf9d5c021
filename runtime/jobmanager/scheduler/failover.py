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

Configuration keys are Flink's (RestartStrategyOptions, JobManagerOptions.EXECUTION_FAILOVER_STRATEGY).
"""
from __future__ import annotations

import math
import random
import time
from collections import deque
from typing import TYPE_CHECKING, Callable, Mapping, Protocol, runtime_checkable

from runtime.core.checkpoint import CHECKPOINT_INTERVAL_KEY
from runtime.core.durations import format_duration_ms, parse_duration_ms  # noqa: F401 - re-exported
from runtime.core.errors import ConfigurationError, MillraceError, ThrowableType, throwable_type_of

if TYPE_CHECKING:  # the API reads the keys and durations here: keep this module free of graph/pydantic imports
    from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID

Clock = Callable[[], float]  # seconds, e.g. time.monotonic

# -- configuration keys (Flink's names) ---------------------------------------------------------
RESTART_STRATEGY_TYPE_KEY = "restart-strategy.type"
RESTART_STRATEGY_DEPRECATED_KEY = "restart-strategy"  # Flink's deprecated spelling of .type
FIXED_DELAY_ATTEMPTS_KEY = "restart-strategy.fixed-delay.attempts"
FIXED_DELAY_DELAY_KEY = "restart-strategy.fixed-delay.delay"
FAILURE_RATE_MAX_FAILURES_KEY = "restart-strategy.failure-rate.max-failures-per-interval"
FAILURE_RATE_INTERVAL_KEY = "restart-strategy.failure-rate.failure-rate-interval"
FAILURE_RATE_DELAY_KEY = "restart-strategy.failure-rate.delay"
EXPONENTIAL_INITIAL_BACKOFF_KEY = "restart-strategy.exponential-delay.initial-backoff"
EXPONENTIAL_MAX_BACKOFF_KEY = "restart-strategy.exponential-delay.max-backoff"
EXPONENTIAL_MULTIPLIER_KEY = "restart-strategy.exponential-delay.backoff-multiplier"
EXPONENTIAL_RESET_THRESHOLD_KEY = "restart-strategy.exponential-delay.reset-backoff-threshold"
EXPONENTIAL_JITTER_KEY = "restart-strategy.exponential-delay.jitter-factor"
EXPONENTIAL_ATTEMPTS_KEY = "restart-strategy.exponential-delay.attempts-before-reset-backoff"
FAILOVER_STRATEGY_KEY = "jobmanager.execution.failover-strategy"

# restart-strategy.type values: main name -> accepted spellings (Flink's RestartStrategyType)
NO_RESTART = "disable"
FIXED_DELAY = "fixed-delay"
FAILURE_RATE = "failure-rate"
EXPONENTIAL_DELAY = "exponential-delay"
RESTART_STRATEGY_TYPES: dict[str, tuple[str, ...]] = {
    NO_RESTART: ("none", "off", "disable"),
    FIXED_DELAY: ("fixed-delay", "fixeddelay"),
    FAILURE_RATE: ("failure-rate", "failurerate"),
    EXPONENTIAL_DELAY: ("exponential-delay", "exponentialdelay"),
}

# Flink's defaults (RestartStrategyOptions, Flink 1.19+)
DEFAULT_FIXED_DELAY_ATTEMPTS = 1
DEFAULT_FIXED_DELAY_MS = 1_000
# A BATCH job without a restart strategy of its own: 3 restarts 1 s apart (Spark's
# spark.task.maxFailures = 4 attempts). A deviation from Flink, where a job without checkpointing
# never restarts: here a batch job's finished stages are committed to Delta, so a restart re-runs
# only the failed region, and a lost TaskManager should not fail a long batch job.
BATCH_DEFAULT_ATTEMPTS = 3
BATCH_DEFAULT_DELAY_MS = 1_000
DEFAULT_FAILURE_RATE_MAX_FAILURES = 1
DEFAULT_FAILURE_RATE_INTERVAL_MS = 60_000
DEFAULT_FAILURE_RATE_DELAY_MS = 1_000
DEFAULT_EXPONENTIAL_INITIAL_MS = 1_000
DEFAULT_EXPONENTIAL_MAX_MS = 60_000
DEFAULT_EXPONENTIAL_MULTIPLIER = 1.5
DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS = 3_600_000
DEFAULT_EXPONENTIAL_JITTER = 0.1
DEFAULT_EXPONENTIAL_ATTEMPTS = 2**31 - 1  # Integer.MAX_VALUE: "infinite"

FULL_FAILOVER = "full"
REGION_FAILOVER = "region"
FAILOVER_STRATEGIES = (REGION_FAILOVER, FULL_FAILOVER)
DEFAULT_FAILOVER_STRATEGY = REGION_FAILOVER


# durations: runtime.core.durations (re-exported: the config keys and the API use them through here)


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
        _require(isinstance(max_attempts, int) and max_attempts >= 0, FIXED_DELAY_ATTEMPTS_KEY, max_attempts, "an int >= 0")
        _require(isinstance(backoff_ms, int) and backoff_ms >= 0, FIXED_DELAY_DELAY_KEY, backoff_ms, ">= 0 ms")
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
        _require(initial_ms >= 1, EXPONENTIAL_INITIAL_BACKOFF_KEY, initial_ms, "at least 1 ms")
        _require(max_ms >= 1, EXPONENTIAL_MAX_BACKOFF_KEY, max_ms, "at least 1 ms")
        _require(initial_ms <= max_ms, EXPONENTIAL_MAX_BACKOFF_KEY, max_ms, f"at least the initial backoff ({initial_ms} ms)")
        _require(multiplier > 1, EXPONENTIAL_MULTIPLIER_KEY, multiplier, "greater than 1")
        _require(reset_threshold_ms >= 1, EXPONENTIAL_RESET_THRESHOLD_KEY, reset_threshold_ms, "at least 1 ms")
        _require(0 <= jitter_factor <= 1, EXPONENTIAL_JITTER_KEY, jitter_factor, "between 0 and 1")
        _require(attempts_before_reset >= 1, EXPONENTIAL_ATTEMPTS_KEY, attempts_before_reset, "at least 1")
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
        _require(
            isinstance(max_failures_per_interval, int) and max_failures_per_interval > 0,
            FAILURE_RATE_MAX_FAILURES_KEY, max_failures_per_interval, "an int greater than 0",
        )
        _require(interval_ms > 0, FAILURE_RATE_INTERVAL_KEY, interval_ms, "greater than 0 ms")
        _require(backoff_ms >= 0, FAILURE_RATE_DELAY_KEY, backoff_ms, ">= 0 ms")
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


def _require(ok: bool, key: str, value: object, what: str) -> None:
    if not ok:
        raise ConfigurationError(f"{key}: {value!r} is not allowed; it must be {what}")


# -- reading the configuration ------------------------------------------------------------------
def _get_duration(config: Mapping[str, str], key: str, default: int) -> int:
    raw = config.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return parse_duration_ms(raw)
    except ConfigurationError as e:
        raise ConfigurationError(f"{key}: {e}") from None


def _get_int(config: Mapping[str, str], key: str, default: int) -> int:
    raw = config.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ConfigurationError(f"{key}: {raw!r} is not an integer") from None


def _get_float(config: Mapping[str, str], key: str, default: float) -> float:
    raw = config.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        return float(str(raw).strip())
    except ValueError:
        raise ConfigurationError(f"{key}: {raw!r} is not a number") from None


def restart_strategy_type(config: Mapping[str, str]) -> str | None:
    """The main name of the configured restart strategy (disable, fixed-delay, failure-rate,
    exponential-delay), or None when the config sets none."""
    raw = config.get(RESTART_STRATEGY_TYPE_KEY)
    key = RESTART_STRATEGY_TYPE_KEY
    if raw is None or str(raw).strip() == "":
        raw, key = config.get(RESTART_STRATEGY_DEPRECATED_KEY), RESTART_STRATEGY_DEPRECATED_KEY
    if raw is None or str(raw).strip() == "":
        return None
    value = str(raw).strip().lower()
    for main, spellings in RESTART_STRATEGY_TYPES.items():
        if value in spellings:
            return main
    allowed = ", ".join(s for spellings in RESTART_STRATEGY_TYPES.values() for s in spellings)
    raise ConfigurationError(f"{key}: unknown restart strategy {raw!r}; use one of {allowed}")


def is_checkpointing_enabled(config: Mapping[str, str]) -> bool:
    """Whether the job config enables periodic checkpoints (execution.checkpointing.interval > 0)."""
    raw = config.get(CHECKPOINT_INTERVAL_KEY)
    if raw is None or str(raw).strip().startswith("-"):
        return False  # unset, or Flink's -1
    return _get_duration(config, CHECKPOINT_INTERVAL_KEY, 0) > 0


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
    fixed-delay with BATCH_DEFAULT_ATTEMPTS (a deviation from Flink, see above), and any other job
    does not restart.
    """
    kind = restart_strategy_type(config)
    if kind is None:
        if checkpointing_enabled:
            kind, config = EXPONENTIAL_DELAY, {}  # the defaults, not stray per-strategy keys
        elif batch:
            return FixedDelayRestartBackoffTimeStrategy(BATCH_DEFAULT_ATTEMPTS, BATCH_DEFAULT_DELAY_MS)
        else:
            kind, config = NO_RESTART, {}
    if kind == NO_RESTART:
        return NoRestartBackoffTimeStrategy()
    if kind == FIXED_DELAY:
        return FixedDelayRestartBackoffTimeStrategy(
            _get_int(config, FIXED_DELAY_ATTEMPTS_KEY, DEFAULT_FIXED_DELAY_ATTEMPTS),
            _get_duration(config, FIXED_DELAY_DELAY_KEY, DEFAULT_FIXED_DELAY_MS),
        )
    if kind == FAILURE_RATE:
        return FailureRateRestartBackoffTimeStrategy(
            _get_int(config, FAILURE_RATE_MAX_FAILURES_KEY, DEFAULT_FAILURE_RATE_MAX_FAILURES),
            _get_duration(config, FAILURE_RATE_INTERVAL_KEY, DEFAULT_FAILURE_RATE_INTERVAL_MS),
            _get_duration(config, FAILURE_RATE_DELAY_KEY, DEFAULT_FAILURE_RATE_DELAY_MS),
            clock,
        )
    return ExponentialDelayRestartBackoffTimeStrategy(
        _get_duration(config, EXPONENTIAL_INITIAL_BACKOFF_KEY, DEFAULT_EXPONENTIAL_INITIAL_MS),
        _get_duration(config, EXPONENTIAL_MAX_BACKOFF_KEY, DEFAULT_EXPONENTIAL_MAX_MS),
        _get_float(config, EXPONENTIAL_MULTIPLIER_KEY, DEFAULT_EXPONENTIAL_MULTIPLIER),
        _get_duration(config, EXPONENTIAL_RESET_THRESHOLD_KEY, DEFAULT_EXPONENTIAL_RESET_THRESHOLD_MS),
        _get_float(config, EXPONENTIAL_JITTER_KEY, DEFAULT_EXPONENTIAL_JITTER),
        _get_int(config, EXPONENTIAL_ATTEMPTS_KEY, DEFAULT_EXPONENTIAL_ATTEMPTS),
        clock,
        rng,
    )


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
    raw = config.get(FAILOVER_STRATEGY_KEY)
    value = DEFAULT_FAILOVER_STRATEGY if raw is None or str(raw).strip() == "" else str(raw).strip().lower()
    if value == REGION_FAILOVER:
        return RestartPipelinedRegionFailoverStrategy(is_partition_available)
    if value == FULL_FAILOVER:
        return RestartAllFailoverStrategy()
    raise ConfigurationError(
        f"{FAILOVER_STRATEGY_KEY}: unknown failover strategy {raw!r}; use one of {', '.join(FAILOVER_STRATEGIES)}"
    )


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
    "format_duration_ms",
    "is_checkpointing_enabled",
    "is_unrecoverable_error",
    "parse_duration_ms",
    "restart_strategy_from_config",
    "restart_strategy_type",
]
