"""Restart back-off strategies and failover strategies (runtime.jobmanager.scheduler.failover).

Time is an injected manual clock: nothing here sleeps.
"""
from __future__ import annotations

import random

import pytest

from runtime.core.errors import ConfigurationError
from runtime.graph.execution_graph import ExecutionGraph, ExecutionVertexID
from runtime.graph.job_graph import DistributionPattern as DP
from runtime.graph.job_graph import JobGraph
from runtime.graph.job_graph import ResultPartitionType as RT
from runtime.graph.job_graph_builder import build_job_graph
from runtime.graph.stream_graph_generator import generate_stream_graph
from runtime.jobmanager.scheduler.failover import (
    ExponentialDelayRestartBackoffTimeStrategy,
    FailoverStrategy,
    FailureRateRestartBackoffTimeStrategy,
    FixedDelayRestartBackoffTimeStrategy,
    NoRestartBackoffTimeStrategy,
    RestartAllFailoverStrategy,
    RestartBackoffTimeStrategy,
    RestartPipelinedRegionFailoverStrategy,
    failover_strategy_from_config,
    format_duration_ms,
    is_checkpointing_enabled,
    parse_duration_ms,
    restart_strategy_from_config,
)
from tests.graph_builders import hand_made_job_graph, key_by, one, sink, source

pytestmark = pytest.mark.unit


class ManualClock:
    """Seconds, like time.monotonic; advanced by hand."""

    def __init__(self, start_ms: int = 1_000_000) -> None:
        self.ms = start_ms

    def __call__(self) -> float:
        return self.ms / 1000

    def advance(self, ms: int) -> None:
        self.ms += ms


# -- durations ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, ms",
    [
        ("100 ms", 100), ("100ms", 100), ("1 s", 1000), ("10s", 10_000), ("1 min", 60_000), ("2 h", 7_200_000),
        ("1 d", 86_400_000), ("250", 250), (" 3 SECONDS ", 3000), ("1.5 s", 1500), ("500 us", 0), (1200, 1200),
        ("5 m", 300_000), ("0", 0),
    ],
)
def test_parse_duration(text: str | int, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("bad", ["", "abc", "10 fortnights", "-5 s", "1 s 2", "s"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(ConfigurationError, match="duration"):
        parse_duration_ms(bad)


def test_format_duration_round_trips() -> None:
    for ms in (0, 1, 250, 1000, 90_000, 60_000, 3_600_000):
        assert parse_duration_ms(format_duration_ms(ms)) == ms


# -- restart back-off strategies ----------------------------------------------------------------
def restarts_allowed(strategy: RestartBackoffTimeStrategy, clock: ManualClock | None = None, step_ms: int = 0) -> int:
    """Fail until the strategy gives up; the number of restarts it allowed."""
    n = 0
    for _ in range(1000):
        strategy.notify_failure(RuntimeError("boom"))
        if not strategy.can_restart():
            return n
        n += 1
        if clock is not None:
            clock.advance(step_ms)
    raise AssertionError("never gave up")


def test_no_restart() -> None:
    s = NoRestartBackoffTimeStrategy()
    s.notify_failure(RuntimeError("x"), 0)
    assert not s.can_restart() and s.describe() == "none"
    assert isinstance(s, RestartBackoffTimeStrategy)


def test_fixed_delay_allows_exactly_the_configured_restarts() -> None:
    s = FixedDelayRestartBackoffTimeStrategy(3, 1000)
    assert restarts_allowed(s) == 3
    assert s.backoff_time_ms() == 1000
    assert s.describe() == "fixed-delay (3 attempts, 1000 ms)"
    assert restarts_allowed(FixedDelayRestartBackoffTimeStrategy(0, 0)) == 0


def test_exponential_grows_by_multiplier_up_to_max_then_resets_after_quiet_time() -> None:
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(
        initial_ms=100, max_ms=1000, multiplier=2.0, reset_threshold_ms=5000, jitter_factor=0.0,
        attempts_before_reset=1000, clock=clock,
    )
    backoffs = []
    for _ in range(7):
        assert s.notify_failure(RuntimeError("x"))
        assert s.can_restart()
        b = s.backoff_time_ms()
        backoffs.append(b)
        clock.advance(b)  # the restart happens
        clock.advance(10)  # ...and fails again shortly after
    assert backoffs == [100, 200, 400, 800, 1000, 1000, 1000]
    # quiet for the reset threshold (measured from the last restart): back to the initial backoff
    clock.advance(5000)
    s.notify_failure(RuntimeError("x"))
    assert s.backoff_time_ms() == 100
    # the remaining backoff shrinks as time passes
    clock.advance(40)
    assert s.backoff_time_ms() == 60


def test_exponential_does_not_reset_before_the_threshold() -> None:
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(100, 10_000, 2.0, 5000, 0.0, clock=clock)
    s.notify_failure(None)
    clock.advance(100 + 4999)
    s.notify_failure(None)
    assert s.backoff_time_ms() == 200


def test_exponential_merges_failures_while_a_restart_is_pending() -> None:
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(100, 1000, 2.0, 5000, 0.0, attempts_before_reset=2, clock=clock)
    assert s.notify_failure("a")
    clock.advance(50)
    assert not s.notify_failure("b")  # same pending restart: not a new attempt
    assert s.backoff_time_ms() == 50 and s.current_attempt == 1


def test_exponential_attempts_before_reset() -> None:
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(10, 100, 2.0, 10_000, 0.0, attempts_before_reset=3, clock=clock)
    assert restarts_allowed(s, clock, step_ms=200) == 3


def test_exponential_jitter_stays_in_range_and_is_seeded() -> None:
    clock = ManualClock()
    s = ExponentialDelayRestartBackoffTimeStrategy(1000, 60_000, 1.5, 3_600_000, 0.1, clock=clock, rng=random.Random(7))
    s.notify_failure(None)
    first = s.backoff_time_ms()
    assert 1000 <= first <= 1100  # never below initial
    clock.advance(first + 1)
    s.notify_failure(None)
    assert 1350 <= s.backoff_time_ms() <= 1650


def test_exponential_timestamp_argument_is_the_failure_time() -> None:
    clock = ManualClock(start_ms=0)
    s = ExponentialDelayRestartBackoffTimeStrategy(100, 1000, 2.0, 5000, 0.0, clock=clock)
    s.notify_failure(None, timestamp_ms=0)
    clock.advance(30)
    assert s.backoff_time_ms() == 70


def test_timestamps_from_another_clock_than_the_strategy_clock() -> None:
    # the scheduler stamps failures with wall-clock ms; the strategies run on a monotonic clock
    mono = ManualClock(start_ms=5_000)
    wall = 1_700_000_000_000
    e = ExponentialDelayRestartBackoffTimeStrategy(100, 1000, 2.0, 5000, 0.0, clock=mono)
    e.notify_failure(None, wall)
    assert e.backoff_time_ms() == 100
    mono.advance(60)
    assert e.backoff_time_ms() == 40
    mono.advance(100)
    e.notify_failure(None, wall + 160)
    assert e.backoff_time_ms() == 200
    f = FailureRateRestartBackoffTimeStrategy(1, 1000, 0, clock=mono)
    f.notify_failure(None, wall)
    mono.advance(2000)
    f.notify_failure(None, wall + 2000)
    assert f.can_restart()  # 2 s apart: never 2 within 1 s
    mono.advance(500)
    f.notify_failure(None, wall + 2500)
    assert not f.can_restart()
    mono.advance(501)
    assert f.can_restart()  # the older of the two left the window


def test_exponential_validates_like_flink() -> None:
    with pytest.raises(ConfigurationError, match="backoff-multiplier.*greater than 1"):
        ExponentialDelayRestartBackoffTimeStrategy(100, 1000, 1.0, 10, 0.0)
    with pytest.raises(ConfigurationError, match="max-backoff"):
        ExponentialDelayRestartBackoffTimeStrategy(1000, 100, 2.0, 10, 0.0)
    with pytest.raises(ConfigurationError, match="jitter-factor"):
        ExponentialDelayRestartBackoffTimeStrategy(100, 1000, 2.0, 10, 1.5)


def test_failure_rate() -> None:
    clock = ManualClock()
    s = FailureRateRestartBackoffTimeStrategy(max_failures_per_interval=2, interval_ms=10_000, backoff_ms=500, clock=clock)
    s.notify_failure(None)
    assert s.can_restart()
    clock.advance(1000)
    s.notify_failure(None)
    assert s.can_restart()
    clock.advance(1000)
    s.notify_failure(None)  # 3 failures within 10 s: more than 2
    assert not s.can_restart()
    assert s.backoff_time_ms() == 500


def test_failure_rate_allows_failures_spread_over_time() -> None:
    clock = ManualClock()
    s = FailureRateRestartBackoffTimeStrategy(2, 10_000, 0, clock=clock)
    for _ in range(20):
        s.notify_failure(None)
        assert s.can_restart()
        clock.advance(5001)  # never 3 within 10 s
    assert s.describe() == "failure-rate (at most 2 failures per 10000 ms, 0 ms delay)"


# -- restart strategy from config ---------------------------------------------------------------
def test_default_without_checkpointing_is_no_restart() -> None:
    assert isinstance(restart_strategy_from_config({}, checkpointing_enabled=False), NoRestartBackoffTimeStrategy)


def test_default_of_a_batch_job_is_three_restarts_a_second_apart() -> None:
    """A deviation from Flink (no restart without checkpointing): a batch job's committed stages make restarts cheap."""
    s = restart_strategy_from_config({}, checkpointing_enabled=False, batch=True)
    assert isinstance(s, FixedDelayRestartBackoffTimeStrategy)
    assert s.describe() == "fixed-delay (3 attempts, 1000 ms)"
    # what the job configures wins; a checkpointed batch job gets the checkpointed default
    configured = restart_strategy_from_config({"restart-strategy.type": "none"}, checkpointing_enabled=False, batch=True)
    assert isinstance(configured, NoRestartBackoffTimeStrategy)
    assert isinstance(restart_strategy_from_config({}, checkpointing_enabled=True, batch=True), ExponentialDelayRestartBackoffTimeStrategy)


def test_default_with_checkpointing_is_exponential_delay_with_flink_defaults() -> None:
    s = restart_strategy_from_config({}, checkpointing_enabled=True)
    assert isinstance(s, ExponentialDelayRestartBackoffTimeStrategy)
    assert (s.initial_ms, s.max_ms, s.multiplier, s.reset_threshold_ms, s.jitter_factor) == (1000, 60_000, 1.5, 3_600_000, 0.1)
    assert s.attempts_before_reset == 2**31 - 1


@pytest.mark.parametrize("name", ["none", "off", "disable", "NONE"])
def test_no_restart_spellings(name: str) -> None:
    s = restart_strategy_from_config({"restart-strategy.type": name}, checkpointing_enabled=True)
    assert isinstance(s, NoRestartBackoffTimeStrategy)


def test_fixed_delay_from_config() -> None:
    cfg = {"restart-strategy.type": "fixeddelay", "restart-strategy.fixed-delay.attempts": "3",
           "restart-strategy.fixed-delay.delay": "10 s"}
    s = restart_strategy_from_config(cfg, False)
    assert isinstance(s, FixedDelayRestartBackoffTimeStrategy)
    assert (s.max_attempts, s.backoff_ms) == (3, 10_000)
    d = restart_strategy_from_config({"restart-strategy.type": "fixed-delay"}, False)
    assert isinstance(d, FixedDelayRestartBackoffTimeStrategy)
    assert (d.max_attempts, d.backoff_ms) == (1, 1000)


def test_deprecated_restart_strategy_key() -> None:
    s = restart_strategy_from_config({"restart-strategy": "fixed-delay"}, False)
    assert isinstance(s, FixedDelayRestartBackoffTimeStrategy)


def test_failure_rate_from_config() -> None:
    clock = ManualClock()
    cfg = {"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.max-failures-per-interval": "3",
           "restart-strategy.failure-rate.failure-rate-interval": "5 min", "restart-strategy.failure-rate.delay": "250"}
    s = restart_strategy_from_config(cfg, False, clock=clock)
    assert isinstance(s, FailureRateRestartBackoffTimeStrategy)
    assert (s.max_failures_per_interval, s.interval_ms, s.backoff_ms) == (3, 300_000, 250)
    d = restart_strategy_from_config({"restart-strategy.type": "failurerate"}, False)
    assert isinstance(d, FailureRateRestartBackoffTimeStrategy)
    assert (d.max_failures_per_interval, d.interval_ms, d.backoff_ms) == (1, 60_000, 1000)


def test_exponential_from_config() -> None:
    cfg = {
        "restart-strategy.type": "exponentialdelay",
        "restart-strategy.exponential-delay.initial-backoff": "10 s",
        "restart-strategy.exponential-delay.max-backoff": "2 min",
        "restart-strategy.exponential-delay.backoff-multiplier": "1.4",
        "restart-strategy.exponential-delay.reset-backoff-threshold": "10 min",
        "restart-strategy.exponential-delay.jitter-factor": "0.2",
        "restart-strategy.exponential-delay.attempts-before-reset-backoff": "10",
    }
    s = restart_strategy_from_config(cfg, False)
    assert isinstance(s, ExponentialDelayRestartBackoffTimeStrategy)
    assert (s.initial_ms, s.max_ms, s.multiplier, s.reset_threshold_ms, s.jitter_factor, s.attempts_before_reset) == (
        10_000, 120_000, 1.4, 600_000, 0.2, 10
    )


@pytest.mark.parametrize(
    "cfg, match",
    [
        ({"restart-strategy.type": "sometimes"}, r"restart-strategy.type: unknown restart strategy 'sometimes'; use one of .*fixed-delay"),
        ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "three"},
         r"restart-strategy.fixed-delay.attempts: 'three' is not an integer"),
        ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "-1"},
         r"restart-strategy.fixed-delay.attempts: -1 is not allowed"),
        ({"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.delay": "soon"},
         r"restart-strategy.fixed-delay.delay: .*'soon'"),
        ({"restart-strategy.type": "failure-rate", "restart-strategy.failure-rate.max-failures-per-interval": "0"},
         r"max-failures-per-interval: 0 is not allowed"),
        ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.backoff-multiplier": "x"},
         r"backoff-multiplier: 'x' is not a number"),
        ({"restart-strategy.type": "exponential-delay", "restart-strategy.exponential-delay.attempts-before-reset-backoff": "0"},
         r"attempts-before-reset-backoff: 0 is not allowed; it must be at least 1"),
    ],
)
def test_restart_config_errors_name_key_and_allowed_values(cfg: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        restart_strategy_from_config(cfg, checkpointing_enabled=False)


def test_is_checkpointing_enabled() -> None:
    assert not is_checkpointing_enabled({})
    assert not is_checkpointing_enabled({"execution.checkpointing.interval": "-1"})
    assert not is_checkpointing_enabled({"execution.checkpointing.interval": "0"})
    assert is_checkpointing_enabled({"execution.checkpointing.interval": "10 s"})
    assert is_checkpointing_enabled({"execution.checkpointing.interval": "500"})


# -- failover strategies ------------------------------------------------------------------------
def compile_(roots: list, parallelism: int, config: dict[str, str] | None = None) -> JobGraph:
    return build_job_graph(generate_stream_graph(roots, "job", parallelism, config=config), job_id="j1")


def names(eg: ExecutionGraph, vertices: set[ExecutionVertexID]) -> set[str]:
    return {f"{eg.job_vertex(v.job_vertex_id).name}#{v.subtask_index}" for v in vertices}


def four_independent_pipelines(chaining: bool) -> ExecutionGraph:
    """source -> map -> sink at parallelism 4, forward all the way: 4 independent pipelines."""
    s = source("Source: events")
    jg = compile_([sink(one(s, "Map"), "Sink: out")], 4, None if chaining else {"pipeline.operator-chaining": "false"})
    return ExecutionGraph(jg)


@pytest.mark.parametrize("chaining", [True, False])
def test_region_failover_restarts_only_the_failed_pipeline(chaining: bool) -> None:
    eg = four_independent_pipelines(chaining)
    assert len(eg.regions) == 4
    strategy = RestartPipelinedRegionFailoverStrategy()
    assert isinstance(strategy, FailoverStrategy)
    failed = next(ev.id for ev in eg.all_vertices() if ev.subtask_index == 2 and len(ev.consumed_inputs) == (0 if chaining else 1))
    got = strategy.get_tasks_to_restart(eg, failed)
    assert got and {v.subtask_index for v in got} == {2}
    assert len(got) == (1 if chaining else 3)  # the chain, or source, map and sink of pipeline 2
    assert got == {ev.id for ev in eg.all_vertices() if ev.subtask_index == 2}


def test_region_failover_with_hash_exchange_restarts_everything() -> None:
    s = source("Source: events")
    eg = ExecutionGraph(compile_([sink(one(key_by(s), "Reduce"), "Sink: out")], 4))
    everything = {ev.id for ev in eg.all_vertices()}
    assert len(everything) == 8  # source(4) | hash | reduce -> sink (4)
    for ev in eg.all_vertices():
        assert RestartPipelinedRegionFailoverStrategy().get_tasks_to_restart(eg, ev.id) == everything


def test_full_failover_restarts_everything() -> None:
    eg = four_independent_pipelines(chaining=True)
    everything = {ev.id for ev in eg.all_vertices()}
    failed = eg.all_vertices()[0].id
    assert RestartAllFailoverStrategy().get_tasks_to_restart(eg, failed) == everything


def test_region_failover_over_blocking_exchange_and_lost_partitions() -> None:
    # A(2) =blocking all-to-all=> B(2) -pipelined pointwise-> C(2)
    eg = ExecutionGraph(hand_made_job_graph(
        [("A", 2), ("B", 2), ("C", 2)],
        [("A", "B", DP.ALL_TO_ALL, RT.BLOCKING), ("B", "C", DP.POINTWISE, RT.PIPELINED_BOUNDED)],
    ))
    ev = ExecutionVertexID
    # committed blocking inputs stay available: only B1's pipeline restarts
    assert RestartPipelinedRegionFailoverStrategy().get_tasks_to_restart(eg, ev("C", 1)) == {ev("B", 1), ev("C", 1)}
    # a producer failure restarts every consumer region downstream of it
    assert RestartPipelinedRegionFailoverStrategy().get_tasks_to_restart(eg, ev("A", 0)) == {
        ev("A", 0), ev("B", 0), ev("C", 0), ev("B", 1), ev("C", 1)
    }
    # a lost partition brings its producer back
    lost = RestartPipelinedRegionFailoverStrategy(lambda pid: pid != "A->B:1")
    assert lost.get_tasks_to_restart(eg, ev("C", 0)) >= {ev("A", 1), ev("B", 0), ev("C", 0)}

    class PartitionLost(Exception):
        partition_id = "A->B:0"

    s = RestartPipelinedRegionFailoverStrategy()
    got = s.get_tasks_to_restart(eg, ev("B", 1), PartitionLost())
    assert ev("A", 0) in got and ev("A", 1) not in got


def test_failover_strategy_from_config() -> None:
    assert isinstance(failover_strategy_from_config({}), RestartPipelinedRegionFailoverStrategy)
    assert isinstance(failover_strategy_from_config({"jobmanager.execution.failover-strategy": "region"}),
                      RestartPipelinedRegionFailoverStrategy)
    assert isinstance(failover_strategy_from_config({"jobmanager.execution.failover-strategy": "Full"}),
                      RestartAllFailoverStrategy)
    with pytest.raises(ConfigurationError, match=r"jobmanager.execution.failover-strategy: unknown failover strategy 'individual'; use one of region, full"):
        failover_strategy_from_config({"jobmanager.execution.failover-strategy": "individual"})
