"""ExecutionConfig (PyFlink's pyflink.common.ExecutionConfig): the part of Flink's ExecutionConfig that
PyFlink programs commonly touch, a view over its StreamExecutionEnvironment's settings."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from runtime.api.common.configuration import Configuration
from runtime.api.common.restart_strategy import RestartStrategyConfiguration
from runtime.core.options import execution as execution_options

if TYPE_CHECKING:  # the environment holds its ExecutionConfig; only the annotation names it here
    from runtime.api.datastream.stream_execution_environment import StreamExecutionEnvironment

WATERMARK_INTERVAL_KEY = execution_options.AUTO_WATERMARK_INTERVAL.key  # the option's key under its old name


class ExecutionConfig:
    """The part of Flink's ExecutionConfig that PyFlink programs commonly touch."""

    def __init__(self, env: StreamExecutionEnvironment) -> None:
        self._env = env
        self._global_job_parameters: dict[str, str] = {}
        self._object_reuse = False

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        """Flink's periodic watermark interval in ms (200 by default); 0: a watermark after every
        input batch (Millrace; see TimestampsAndWatermarksOperator)."""
        if interval < 0:
            raise ValueError(f"the auto watermark interval must be >= 0 ms, got {interval}")
        self._env._config.set_integer(WATERMARK_INTERVAL_KEY, interval)
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._env._config.get(execution_options.AUTO_WATERMARK_INTERVAL)

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        self._env.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionConfig:
        self._env.set_max_parallelism(max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return self._env.get_max_parallelism()

    def set_global_job_parameters(self, global_job_parameters: Any) -> ExecutionConfig:
        items = global_job_parameters.to_dict() if isinstance(global_job_parameters, Configuration) else dict(global_job_parameters)
        self._global_job_parameters = {str(k): str(v) for k, v in items.items()}
        return self

    def get_global_job_parameters(self) -> dict[str, str]:
        return dict(self._global_job_parameters)

    def enable_object_reuse(self) -> ExecutionConfig:
        self._object_reuse = True  # recorded only: records are never copied inside a chain anyway
        return self

    def disable_object_reuse(self) -> ExecutionConfig:
        self._object_reuse = False
        return self

    def is_object_reuse_enabled(self) -> bool:
        return self._object_reuse

    def set_restart_strategy(self, restart_strategy_configuration: RestartStrategyConfiguration) -> ExecutionConfig:
        self._env.set_restart_strategy(restart_strategy_configuration)
        return self

    def get_restart_strategy(self) -> RestartStrategyConfiguration:
        return self._env.get_restart_strategy()
