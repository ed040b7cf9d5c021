"""PyFlink's fault tolerance API: RestartStrategies, CheckpointConfig, state backends, and the
Flink keys they write into the job config."""
from __future__ import annotations

from datetime import timedelta

import pytest

import runtime.api.datastream.stream_execution_environment as env_module
from runtime.api.common import CheckpointingMode as CommonCheckpointingMode
from runtime.api.common import Configuration, RestartStrategies, RestartStrategyConfiguration, Time
from runtime.api.datastream import (
    CheckpointConfig,
    CheckpointingMode,
    EmbeddedRocksDBStateBackend,
    ExternalizedCheckpointRetention,
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    StreamExecutionEnvironment,
)
from runtime.core import checkpoint as core_checkpoint
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.jobmanager.scheduler.failover import (
    ExponentialDelayRestartBackoffTimeStrategy,
    FixedDelayRestartBackoffTimeStrategy,
    NoRestartBackoffTimeStrategy,
    RestartAllFailoverStrategy,
    failover_strategy_from_config,
    is_checkpointing_enabled,
    restart_strategy_from_config,
)
from runtime.state import BACKEND_KINDS

pytestmark = pytest.mark.unit


@pytest.fixture
def env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()


def job_config(env: StreamExecutionEnvironment) -> dict[str, str]:
    env.from_collection([1, 2, 3]).map(lambda x: x).print()
    return env.get_job_graph("job").config


def restart_keys(cfg: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in cfg.items() if k.startswith("restart-strategy")}


# -- CheckpointingMode and config keys ----------------------------------------------------------
def test_checkpointing_mode_is_the_core_enum_everywhere() -> None:
    assert CheckpointingMode is core_checkpoint.CheckpointingMode is CommonCheckpointingMode


def test_environment_uses_the_core_checkpoint_keys() -> None:
    assert env_module.CHECKPOINT_INTERVAL_KEY is core_checkpoint.CHECKPOINT_INTERVAL_KEY
    assert env_module.CHECKPOINT_MODE_KEY is core_checkpoint.CHECKPOINT_MODE_KEY


# -- RestartStrategies --------------------------------------------------------------------------
def test_restart_strategies_turn_into_flink_keys() -> None:
    assert RestartStrategies.no_restart().to_configuration() == {"restart-strategy.type": "disable"}
    assert RestartStrategies.fixed_delay_restart(3, timedelta(seconds=2)).to_configuration() == {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "2000",
    }
    assert RestartStrategies.failure_rate_restart(5, timedelta(minutes=5), 1000).to_configuration() == {
        "restart-strategy.type": "failure-rate",
        "restart-strategy.failure-rate.max-failures-per-interval": "5",
        "restart-strategy.failure-rate.failure-rate-interval": "300000",
        "restart-strategy.failure-rate.delay": "1000",
    }
    cfg = RestartStrategies.exponential_delay_restart(100, timedelta(seconds=10), 2.0, Time.minutes(1), 0.1).to_configuration()
    assert cfg == {
        "restart-strategy.type": "exponential-delay",
        "restart-strategy.exponential-delay.initial-backoff": "100",
        "restart-strategy.exponential-delay.max-backoff": "10000",
        "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
        "restart-strategy.exponential-delay.reset-backoff-threshold": "60000",
        "restart-strategy.exponential-delay.jitter-factor": "0.1",
    }
    assert RestartStrategies.fall_back_restart().to_configuration() == {}


def test_restart_strategy_getters_and_descriptions() -> None:
    f = RestartStrategies.fixed_delay_restart(3, 1500)
    assert f.get_restart_attempts() == 3 and f.get_delay_between_attempts_interval() == timedelta(milliseconds=1500)
    r = RestartStrategies.failure_rate_restart(2, 60_000, 10)
    assert r.get_max_failure_rate() == 2 and r.get_failure_interval() == timedelta(minutes=1)
    e = RestartStrategies.exponential_delay_restart(1, 1000, 1.1, 2000, 0.1)
    assert e.get_backoff_multiplier() == 1.1 and e.get_max_backoff() == timedelta(seconds=1)
    assert RestartStrategies.no_restart().get_description() == "Restart deactivated."
    assert f == RestartStrategies.fixed_delay_restart(3, timedelta(milliseconds=1500)) and f != r
    assert len({f, RestartStrategies.fixed_delay_restart(3, 1500)}) == 1


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: RestartStrategies.fixed_delay_restart(-1, 1000), "restart_attempts must be an int >= 0"),
        (lambda: RestartStrategies.fixed_delay_restart(3, "1 s"), "delay_between_attempts: expected milliseconds"),
        (lambda: RestartStrategies.failure_rate_restart(0, 1000, 10), "failure_rate must be an int >= 1"),
        (lambda: RestartStrategies.exponential_delay_restart(100, 10, 2.0, 1000, 0.1), "max_backoff .* must be at least initial_backoff"),
        (lambda: RestartStrategies.exponential_delay_restart(100, 1000, 1.0, 1000, 0.1), "backoff_multiplier must be greater than 1"),
        (lambda: RestartStrategies.exponential_delay_restart(100, 1000, 2.0, 1000, 2.0), "jitter_factor must be between 0 and 1"),
    ],
)
def test_restart_strategy_argument_errors(make, match: str) -> None:
    with pytest.raises(InvalidProgramError, match=match):
        make()


def test_env_set_restart_strategy_flows_into_job_config_and_runtime(env: StreamExecutionEnvironment) -> None:
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 1000))
    assert env.get_restart_strategy() == RestartStrategies.fixed_delay_restart(3, 1000)
    cfg = job_config(env)
    s = restart_strategy_from_config(cfg, is_checkpointing_enabled(cfg))
    assert isinstance(s, FixedDelayRestartBackoffTimeStrategy) and s.describe() == "fixed-delay (3 attempts, 1000 ms)"


def test_set_restart_strategy_replaces_the_previous_keys(env: StreamExecutionEnvironment) -> None:
    env.set_restart_strategy(RestartStrategies.exponential_delay_restart(10, 100, 2.0, 1000, 0.0))
    env.get_config().set_restart_strategy(RestartStrategies.no_restart())
    assert restart_keys(env.get_configuration().to_dict()) == {"restart-strategy.type": "disable"}
    assert env.get_config().get_restart_strategy() == RestartStrategies.no_restart()
    env.set_restart_strategy(RestartStrategies.fall_back_restart())
    assert restart_keys(env.get_configuration().to_dict()) == {}
    assert isinstance(env.get_restart_strategy(), RestartStrategies.FallbackRestartStrategyConfiguration)


def test_set_restart_strategy_rejects_other_objects(env: StreamExecutionEnvironment) -> None:
    with pytest.raises(InvalidProgramError, match="expected a RestartStrategies"):
        env.set_restart_strategy("fixed-delay")  # type: ignore[arg-type]  # the wrong type is the case under test


def test_restart_strategy_read_back_from_a_configuration() -> None:
    e = StreamExecutionEnvironment.get_execution_environment(
        Configuration().set_string("restart-strategy.type", "exponential-delay")
        .set_string("restart-strategy.exponential-delay.initial-backoff", "1 s")
    )
    got = e.get_restart_strategy()
    assert isinstance(got, RestartStrategyConfiguration)
    assert isinstance(got, RestartStrategies.ExponentialDelayRestartStrategyConfiguration)
    assert got.get_initial_backoff() == timedelta(seconds=1) and got.get_backoff_multiplier() == 1.5


def test_default_restart_strategy_depends_on_checkpointing(env: StreamExecutionEnvironment) -> None:
    cfg = job_config(env)
    assert isinstance(restart_strategy_from_config(cfg, is_checkpointing_enabled(cfg)), NoRestartBackoffTimeStrategy)
    e = StreamExecutionEnvironment.get_execution_environment().enable_checkpointing(1000)
    cfg = job_config(e)
    assert isinstance(restart_strategy_from_config(cfg, is_checkpointing_enabled(cfg)), ExponentialDelayRestartBackoffTimeStrategy)


# -- CheckpointConfig ---------------------------------------------------------------------------
def test_checkpoint_config_defaults(env: StreamExecutionEnvironment) -> None:
    cc = env.get_checkpoint_config()
    assert isinstance(cc, CheckpointConfig)
    assert not cc.is_checkpointing_enabled() and cc.get_checkpoint_interval() == -1
    assert cc.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE
    assert cc.get_checkpoint_timeout() == 10 * 60 * 1000
    assert cc.get_min_pause_between_checkpoints() == 0
    assert cc.get_max_concurrent_checkpoints() == 1
    assert cc.get_tolerable_checkpoint_failure_number() == 0
    assert cc.get_checkpoint_storage() is None
    assert cc.get_externalized_checkpoint_retention() is ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
    assert not cc.is_externalized_checkpoints_enabled() and not cc.is_unaligned_checkpoints_enabled()
    assert env.get_checkpoint_interval() == -1


def test_enable_checkpointing_and_setters_write_flink_keys(env: StreamExecutionEnvironment, tmp_path) -> None:
    env.enable_checkpointing(500, CheckpointingMode.AT_LEAST_ONCE)
    cc = env.get_checkpoint_config()
    cc.set_checkpoint_timeout(60_000).set_min_pause_between_checkpoints(100)
    cc.set_max_concurrent_checkpoints(1).set_tolerable_checkpoint_failure_number(2)
    cc.set_checkpoint_storage_dir(str(tmp_path))
    cc.set_externalized_checkpoint_retention(ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION)
    assert cc.is_checkpointing_enabled() and env.get_checkpoint_interval() == 500
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert cc.get_checkpoint_storage() == FileSystemCheckpointStorage(str(tmp_path))
    cfg = job_config(env)
    assert {k: cfg[k] for k in cfg if k.startswith(("execution.checkpointing", "state.checkpoints"))} == {
        "execution.checkpointing.interval": "500",
        "execution.checkpointing.mode": "AT_LEAST_ONCE",
        "execution.checkpointing.timeout": "60000",
        "execution.checkpointing.min-pause": "100",
        "execution.checkpointing.max-concurrent-checkpoints": "1",
        "execution.checkpointing.tolerable-failed-checkpoints": "2",
        "execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION",
        "state.checkpoints.dir": str(tmp_path),
    }


def test_enable_checkpointing_without_mode_keeps_the_configured_mode(env: StreamExecutionEnvironment) -> None:
    env.get_checkpoint_config().set_checkpointing_mode("at-least-once")
    env.enable_checkpointing(1000)
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    env.enable_checkpointing(1000, CheckpointingMode.EXACTLY_ONCE)
    assert env.get_checkpointing_mode() is CheckpointingMode.EXACTLY_ONCE


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda e: e.enable_checkpointing(5), "checkpoint interval must be at least 10 ms, got 5 ms"),
        (lambda e: e.enable_checkpointing(1000, "sometimes"), "unknown checkpointing mode 'sometimes'; use one of EXACTLY_ONCE, AT_LEAST_ONCE"),
        (lambda e: e.get_checkpoint_config().set_max_concurrent_checkpoints(2), r"only 1 concurrent checkpoint is supported"),
        (lambda e: e.get_checkpoint_config().set_checkpoint_timeout(5), r"must be >= 10"),
        (lambda e: e.get_checkpoint_config().set_tolerable_checkpoint_failure_number(-1), r"must be >= 0"),
        (lambda e: e.get_checkpoint_config().set_min_pause_between_checkpoints(-1), r"must be >= 0"),
        (lambda e: e.get_checkpoint_config().enable_unaligned_checkpoints(), r"unaligned checkpoints are not supported"),
        (lambda e: e.get_checkpoint_config().set_externalized_checkpoint_retention("KEEP"), r"unknown retention 'KEEP'"),
    ],
)
def test_checkpoint_config_errors(env: StreamExecutionEnvironment, call, match: str) -> None:
    with pytest.raises(InvalidProgramError, match=match):
        call(env)
    assert not env.get_checkpoint_config().is_checkpointing_enabled()  # nothing half-set


def test_checkpoint_config_reads_flink_duration_strings() -> None:
    e = StreamExecutionEnvironment.get_execution_environment(
        {"execution.checkpointing.interval": "10 s", "execution.checkpointing.timeout": "2 min",
         "execution.checkpointing.mode": "AT_LEAST_ONCE"}
    )
    cc = e.get_checkpoint_config()
    assert cc.get_checkpoint_interval() == 10_000 and cc.get_checkpoint_timeout() == 120_000
    assert cc.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE


# -- state backends -----------------------------------------------------------------------------
def test_state_backends_set_state_backend_type(env: StreamExecutionEnvironment) -> None:
    assert env.get_state_backend() is None
    env.set_state_backend(EmbeddedRocksDBStateBackend())
    assert env.get_state_backend() == EmbeddedRocksDBStateBackend()
    assert job_config(env)["state.backend.type"] == "rocksdb"
    e = StreamExecutionEnvironment.get_execution_environment().set_state_backend(HashMapStateBackend())
    assert job_config(e)["state.backend.type"] == "hashmap"
    assert {HashMapStateBackend.TYPE, EmbeddedRocksDBStateBackend.TYPE} == set(BACKEND_KINDS)


def test_state_backend_replaces_the_older_key_and_records_rocksdb_dir(tmp_path) -> None:
    from runtime.api.operators.runtime_context import ROCKSDB_LOCAL_DIR_KEY, STATE_BACKEND_CONFIG_KEYS

    e = StreamExecutionEnvironment.get_execution_environment({"state.backend": "hashmap"})
    e.set_state_backend(EmbeddedRocksDBStateBackend().set_db_storage_paths(str(tmp_path)))
    cfg = job_config(e)
    # what operators read: the first of STATE_BACKEND_CONFIG_KEYS present
    assert next(cfg[k] for k in STATE_BACKEND_CONFIG_KEYS if k in cfg) == "rocksdb"
    assert cfg[ROCKSDB_LOCAL_DIR_KEY] == str(tmp_path)


def test_set_state_backend_rejects_other_objects(env: StreamExecutionEnvironment) -> None:
    with pytest.raises(InvalidProgramError, match="expected HashMapStateBackend"):
        env.set_state_backend("rocksdb")  # type: ignore[arg-type]  # the wrong type is the case under test


# -- a Configuration carries everything into JobGraph.config -------------------------------------
FAULT_TOLERANCE_CONFIG = {
    "execution.checkpointing.interval": "5 s",
    "execution.checkpointing.mode": "AT_LEAST_ONCE",
    "execution.checkpointing.timeout": "1 min",
    "execution.checkpointing.tolerable-failed-checkpoints": "3",
    "state.checkpoints.dir": "/tmp/millrace-ckpt",
    "state.backend.type": "rocksdb",
    "restart-strategy.type": "fixed-delay",
    "restart-strategy.fixed-delay.attempts": "4",
    "restart-strategy.fixed-delay.delay": "2 s",
    "jobmanager.execution.failover-strategy": "full",
}


def test_configuration_from_get_execution_environment_reaches_the_job_graph() -> None:
    e = StreamExecutionEnvironment.get_execution_environment(Configuration(FAULT_TOLERANCE_CONFIG))
    cfg = job_config(e)
    assert {k: cfg[k] for k in FAULT_TOLERANCE_CONFIG} == FAULT_TOLERANCE_CONFIG
    assert e.get_checkpoint_config().get_checkpoint_interval() == 5000
    assert e.get_restart_strategy() == RestartStrategies.fixed_delay_restart(4, 2000)
    assert isinstance(failover_strategy_from_config(cfg), RestartAllFailoverStrategy)


def test_configure_reaches_the_job_graph(env: StreamExecutionEnvironment) -> None:
    env.configure(FAULT_TOLERANCE_CONFIG)
    cfg = job_config(env)
    assert {k: cfg[k] for k in FAULT_TOLERANCE_CONFIG} == FAULT_TOLERANCE_CONFIG
    assert isinstance(env.get_state_backend(), EmbeddedRocksDBStateBackend)


@pytest.mark.parametrize(
    "bad, match",
    [
        ({"restart-strategy.type": "sometimes"}, "restart-strategy.type: unknown restart strategy 'sometimes'"),
        ({"jobmanager.execution.failover-strategy": "individual"}, "failover-strategy: unknown failover strategy 'individual'; use one of region, full"),
        ({"execution.checkpointing.interval": "5 ms"}, r"execution.checkpointing.interval: '5 ms' is too short"),
        ({"execution.checkpointing.interval": "often"}, r"execution.checkpointing.interval: .*'often'"),
        ({"execution.checkpointing.mode": "ONCE"}, r"execution.checkpointing.mode: unknown checkpointing mode 'ONCE'"),
        ({"execution.checkpointing.max-concurrent-checkpoints": "2"}, r"only 1 concurrent checkpoint is supported"),
        ({"state.backend.type": "leveldb"}, r"state.backend.type: unknown state backend 'leveldb'; use one of hashmap, rocksdb"),
    ],
)
def test_bad_configuration_is_rejected_naming_the_key(bad: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        StreamExecutionEnvironment.get_execution_environment(bad)
    with pytest.raises(ConfigurationError, match=match):
        StreamExecutionEnvironment.get_execution_environment().configure(bad)
    # set behind the API's back: caught when the job is compiled, naming the job
    e = StreamExecutionEnvironment.get_execution_environment()
    e.get_configuration().add_all(bad)
    with pytest.raises(ConfigurationError, match=f"job 'job': .*{match}"):
        job_config(e)
