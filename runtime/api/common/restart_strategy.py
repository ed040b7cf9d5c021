"""RestartStrategies, mirroring pyflink.common.restart_strategy.

A RestartStrategyConfiguration is a value: it turns into Flink's `restart-strategy.*` keys in the
job config (the options of runtime.core.options.restart), which the JobMaster reads through their
one parser, RestartStrategySettings. Durations are milliseconds (int), `datetime.timedelta`, or
`runtime.api.common.time.Duration` / `Time`.

    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 1000))
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from runtime.api.common.time import Duration
from runtime.core.errors import InvalidProgramError
from runtime.core.options import restart as ro

DurationLike = int | timedelta | Duration

RESTART_STRATEGY_KEY_PREFIX = ro.RESTART_STRATEGY.deprecated_keys[0]  # "restart-strategy": every key of the family starts so


def _to_ms(value: DurationLike, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidProgramError(f"{what}: expected milliseconds (int) or datetime.timedelta, got {value!r}")
    if isinstance(value, Duration):
        ms = value.to_milliseconds()
    elif isinstance(value, timedelta):
        ms = int(round(value.total_seconds() * 1000))
    elif isinstance(value, int):
        ms = value
    else:
        raise InvalidProgramError(
            f"{what}: expected milliseconds (int) or datetime.timedelta, got {type(value).__name__} {value!r}"
        )
    if ms < 0:
        raise InvalidProgramError(f"{what}: must not be negative, got {ms} ms")
    return ms


def _td(ms: int) -> timedelta:
    return timedelta(milliseconds=ms)


def is_restart_strategy_key(key: str) -> bool:
    return key == RESTART_STRATEGY_KEY_PREFIX or key.startswith(RESTART_STRATEGY_KEY_PREFIX + ".")


class RestartStrategyConfiguration:
    """PyFlink's RestartStrategyConfiguration: what to do when a job fails."""

    def get_description(self) -> str:
        raise NotImplementedError

    def to_configuration(self) -> dict[str, str]:
        """The `restart-strategy.*` keys this strategy sets in the job config (empty: cluster default)."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_configuration() == self.to_configuration()

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.to_configuration().items()))))

    def __str__(self) -> str:
        return self.get_description()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_description()!r})"


class RestartStrategies:
    """Factories of RestartStrategyConfigurations (PyFlink's RestartStrategies)."""

    class NoRestartStrategyConfiguration(RestartStrategyConfiguration):
        """The first failure fails the job."""

        def get_description(self) -> str:
            return "Restart deactivated."

        def to_configuration(self) -> dict[str, str]:
            return {ro.RESTART_STRATEGY.key: ro.NO_RESTART}

    class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """At most `restart_attempts` restarts, `delay_between_attempts_interval` apart."""

        def __init__(self, restart_attempts: int, delay_between_attempts_interval: DurationLike) -> None:
            if not isinstance(restart_attempts, int) or isinstance(restart_attempts, bool) or restart_attempts < 0:
                raise InvalidProgramError(
                    f"fixed_delay_restart(): restart_attempts must be an int >= 0, got {restart_attempts!r}"
                )
            self._attempts = restart_attempts
            self._delay_ms = _to_ms(delay_between_attempts_interval, "fixed_delay_restart(): delay_between_attempts")

        def get_restart_attempts(self) -> int:
            return self._attempts

        def get_delay_between_attempts_interval(self) -> timedelta:
            return _td(self._delay_ms)

        def get_description(self) -> str:
            return f"Restart with fixed delay ({self._delay_ms} ms). #{self._attempts} restart attempts."

        def to_configuration(self) -> dict[str, str]:
            return {
                ro.RESTART_STRATEGY.key: ro.FIXED_DELAY,
                ro.FIXED_DELAY_ATTEMPTS.key: str(self._attempts),
                ro.FIXED_DELAY_DELAY.key: str(self._delay_ms),
            }

    class FailureRateRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Restart unless more than `max_failure_rate` failures happen within `failure_interval`."""

        def __init__(
            self, max_failure_rate: int, failure_interval: DurationLike, delay_between_attempts_interval: DurationLike
        ) -> None:
            if not isinstance(max_failure_rate, int) or isinstance(max_failure_rate, bool) or max_failure_rate < 1:
                raise InvalidProgramError(f"failure_rate_restart(): failure_rate must be an int >= 1, got {max_failure_rate!r}")
            self._max = max_failure_rate
            self._interval_ms = _to_ms(failure_interval, "failure_rate_restart(): failure_interval")
            if self._interval_ms < 1:
                raise InvalidProgramError("failure_rate_restart(): failure_interval must be at least 1 ms, got 0")
            self._delay_ms = _to_ms(delay_between_attempts_interval, "failure_rate_restart(): delay_interval")

        def get_max_failure_rate(self) -> int:
            return self._max

        def get_failure_interval(self) -> timedelta:
            return _td(self._interval_ms)

        def get_delay_between_attempts_interval(self) -> timedelta:
            return _td(self._delay_ms)

        def get_description(self) -> str:
            return (
                f"Failure rate restart with maximum of {self._max} failures within interval "
                f"{self._interval_ms} ms and fixed delay {self._delay_ms} ms."
            )

        def to_configuration(self) -> dict[str, str]:
            return {
                ro.RESTART_STRATEGY.key: ro.FAILURE_RATE,
                ro.FAILURE_RATE_MAX_FAILURES.key: str(self._max),
                ro.FAILURE_RATE_INTERVAL.key: str(self._interval_ms),
                ro.FAILURE_RATE_DELAY.key: str(self._delay_ms),
            }

    class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Back-off growing by `backoff_multiplier` up to `max_backoff`, reset after a quiet period."""

        def __init__(
            self,
            initial_backoff: DurationLike,
            max_backoff: DurationLike,
            backoff_multiplier: float,
            reset_backoff_threshold: DurationLike,
            jitter_factor: float,
            attempts_before_reset_backoff: int | None = None,
        ) -> None:
            w = "exponential_delay_restart()"
            self._initial_ms = _to_ms(initial_backoff, f"{w}: initial_backoff")
            self._max_ms = _to_ms(max_backoff, f"{w}: max_backoff")
            self._multiplier = float(backoff_multiplier)
            self._reset_ms = _to_ms(reset_backoff_threshold, f"{w}: reset_backoff_threshold")
            self._jitter = float(jitter_factor)
            self._attempts = attempts_before_reset_backoff
            if self._initial_ms < 1:
                raise InvalidProgramError(f"{w}: initial_backoff must be at least 1 ms, got {self._initial_ms} ms")
            if self._max_ms < self._initial_ms:
                raise InvalidProgramError(
                    f"{w}: max_backoff ({self._max_ms} ms) must be at least initial_backoff ({self._initial_ms} ms)"
                )
            if not self._multiplier > 1:
                raise InvalidProgramError(f"{w}: backoff_multiplier must be greater than 1, got {backoff_multiplier!r}")
            if self._reset_ms < 1:
                raise InvalidProgramError(f"{w}: reset_backoff_threshold must be at least 1 ms, got {self._reset_ms} ms")
            if not 0 <= self._jitter <= 1:
                raise InvalidProgramError(f"{w}: jitter_factor must be between 0 and 1, got {jitter_factor!r}")
            if attempts_before_reset_backoff is not None and (
                not isinstance(attempts_before_reset_backoff, int) or attempts_before_reset_backoff < 1
            ):
                raise InvalidProgramError(
                    f"{w}: attempts_before_reset_backoff must be an int >= 1 (or None: unlimited), "
                    f"got {attempts_before_reset_backoff!r}"
                )

        def get_initial_backoff(self) -> timedelta:
            return _td(self._initial_ms)

        def get_max_backoff(self) -> timedelta:
            return _td(self._max_ms)

        def get_backoff_multiplier(self) -> float:
            return self._multiplier

        def get_reset_backoff_threshold(self) -> timedelta:
            return _td(self._reset_ms)

        def get_jitter_factor(self) -> float:
            return self._jitter

        def get_attempts_before_reset_backoff(self) -> int | None:
            return self._attempts

        def get_description(self) -> str:
            return (
                f"Restart with exponential delay: starting at {self._initial_ms} ms, increasing by "
                f"{self._multiplier:g}, with maximum {self._max_ms} ms. Delay resets after {self._reset_ms} ms "
                f"with jitter {self._jitter:g}"
            )

        def to_configuration(self) -> dict[str, str]:
            cfg = {
                ro.RESTART_STRATEGY.key: ro.EXPONENTIAL_DELAY,
                ro.EXPONENTIAL_DELAY_INITIAL_BACKOFF.key: str(self._initial_ms),
                ro.EXPONENTIAL_DELAY_MAX_BACKOFF.key: str(self._max_ms),
                ro.EXPONENTIAL_DELAY_BACKOFF_MULTIPLIER.key: repr(self._multiplier),
                ro.EXPONENTIAL_DELAY_RESET_BACKOFF_THRESHOLD.key: str(self._reset_ms),
                ro.EXPONENTIAL_DELAY_JITTER_FACTOR.key: repr(self._jitter),
            }
            if self._attempts is not None:
                cfg[ro.EXPONENTIAL_DELAY_ATTEMPTS.key] = str(self._attempts)
            return cfg

    class FallbackRestartStrategyConfiguration(RestartStrategyConfiguration):
        """Use the cluster's (or Flink's default) restart strategy: sets no keys."""

        def get_description(self) -> str:
            return "Cluster level default restart strategy"

        def to_configuration(self) -> dict[str, str]:
            return {}

    @staticmethod
    def no_restart() -> RestartStrategies.NoRestartStrategyConfiguration:
        return RestartStrategies.NoRestartStrategyConfiguration()

    @staticmethod
    def fall_back_restart() -> RestartStrategies.FallbackRestartStrategyConfiguration:
        return RestartStrategies.FallbackRestartStrategyConfiguration()

    @staticmethod
    def fixed_delay_restart(
        restart_attempts: int, delay_between_attempts: DurationLike
    ) -> RestartStrategies.FixedDelayRestartStrategyConfiguration:
        """`restart_attempts` restarts at most, `delay_between_attempts` (ms or timedelta) apart."""
        return RestartStrategies.FixedDelayRestartStrategyConfiguration(restart_attempts, delay_between_attempts)

    @staticmethod
    def failure_rate_restart(
        failure_rate: int, failure_interval: DurationLike, delay_interval: DurationLike
    ) -> RestartStrategies.FailureRateRestartStrategyConfiguration:
        """Fail the job once more than `failure_rate` failures happen within `failure_interval`."""
        return RestartStrategies.FailureRateRestartStrategyConfiguration(failure_rate, failure_interval, delay_interval)

    @staticmethod
    def exponential_delay_restart(
        initial_backoff: DurationLike,
        max_backoff: DurationLike,
        backoff_multiplier: float,
        reset_backoff_threshold: DurationLike,
        jitter_factor: float,
        attempts_before_reset_backoff: int | None = None,
    ) -> RestartStrategies.ExponentialDelayRestartStrategyConfiguration:
        """Exponentially growing delays; `attempts_before_reset_backoff` (Flink's config option) caps
        the restarts between resets (None: unlimited)."""
        return RestartStrategies.ExponentialDelayRestartStrategyConfiguration(
            initial_backoff, max_backoff, backoff_multiplier, reset_backoff_threshold, jitter_factor,
            attempts_before_reset_backoff,
        )

    @staticmethod
    def from_configuration(config: Mapping[str, str]) -> RestartStrategyConfiguration:
        """The strategy a job config describes (Flink's RestartStrategies.fromConfiguration);
        fall_back_restart() when it sets no restart-strategy.type. Raises ConfigurationError on bad keys."""
        s = ro.restart_strategy_from_config(config)
        if s is None:
            return RestartStrategies.fall_back_restart()
        if isinstance(s, ro.FixedDelaySettings):
            return RestartStrategies.fixed_delay_restart(s.attempts, s.delay_ms)
        if isinstance(s, ro.FailureRateSettings):
            return RestartStrategies.failure_rate_restart(s.max_failures_per_interval, s.interval_ms, s.delay_ms)
        if isinstance(s, ro.ExponentialDelaySettings):
            return RestartStrategies.exponential_delay_restart(
                s.initial_ms, s.max_ms, s.multiplier, s.reset_threshold_ms, s.jitter_factor, s.attempts_before_reset
            )
        return RestartStrategies.no_restart()


__all__ = ["RestartStrategies", "RestartStrategyConfiguration", "is_restart_strategy_key"]
