"""StreamExecutionEnvironment (PyFlink's pyflink.datastream.StreamExecutionEnvironment).

Collects the transformations that sinks register, compiles them (StreamGraph -> JobGraph) and
hands the JobGraph to the current PipelineExecutor (runtime.api.execution).

Fault tolerance settings (checkpointing, state backend, restart strategy, failover strategy)
are Flink's configuration keys in the environment's Configuration, whether set through the API
(`enable_checkpointing`, `get_checkpoint_config()`, `set_state_backend`,
`set_restart_strategy`) or given as a Configuration; they travel to the JobMaster in
JobGraph.config and are validated when the job is compiled.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from runtime.api.common.configuration import Configuration, RuntimeExecutionMode
from runtime.api.common.execution_config import WATERMARK_INTERVAL_KEY, ExecutionConfig  # noqa: F401 - the key is re-exported
from runtime.api.common.restart_strategy import (
    RestartStrategies,
    RestartStrategyConfiguration,
    is_restart_strategy_key,
)
from runtime.api.datastream.checkpoint_config import CheckpointConfig, StateBackend, state_backend_from_config
from runtime.api.datastream.data_stream import DataStream
from runtime.core.checkpoint import CHECKPOINT_INTERVAL_KEY, CHECKPOINT_MODE_KEY, CheckpointingMode  # noqa: F401 - keys re-exported
from runtime.core.errors import ConfigurationError, InvalidProgramError
from runtime.core.options import checkpointing as checkpointing_options
from runtime.core.options import execution as execution_options
from runtime.core.options import restart as restart_options
from runtime.core.options import state as state_options
from runtime.graph.transformations import OneInputTransformation, SourceTransformation, Transformation

DEFAULT_JOB_NAME = "Millrace Streaming Job"
DEFAULT_MAX_PARALLELISM = execution_options.DEFAULT_MAX_PARALLELISM

# the option keys under their old names (declared in runtime.core.options)
PARALLELISM_KEY = execution_options.PARALLELISM.key
MAX_PARALLELISM_KEY = execution_options.MAX_PARALLELISM.key
RUNTIME_MODE_KEY = execution_options.RUNTIME_MODE.key
CHAINING_KEY = execution_options.OPERATOR_CHAINING.key
BUFFER_TIMEOUT_KEY = execution_options.BUFFER_TIMEOUT.key
# WATERMARK_INTERVAL_KEY: ExecutionConfig's (runtime.api.common.execution_config), imported above
# CHECKPOINT_INTERVAL_KEY / CHECKPOINT_MODE_KEY: runtime.core.checkpoint's, imported above
RESTART_STRATEGY_TYPE_KEY = restart_options.RESTART_STRATEGY.key
FAILOVER_STRATEGY_KEY = restart_options.FAILOVER_STRATEGY.key


def validate_fault_tolerance_config(config: Configuration | dict[str, str]) -> None:
    """Raise ConfigurationError naming the key when an execution.checkpointing.*, state.backend*,
    restart-strategy.* or failover-strategy value is malformed or unsupported: each family is read
    by its one parser, the one the JobMaster and the TaskManagers read it with."""
    d = Configuration(config).to_dict()
    checkpointing_options.CheckpointingSettings.from_config(d)
    state_options.StateBackendSettings.from_config(d)
    restart_options.RestartStrategySettings.from_config(d)


class StreamExecutionEnvironment:
    def __init__(self, configuration: Configuration | dict[str, Any] | None = None) -> None:
        self._config = Configuration(configuration)
        self._parallelism = self._config.get(execution_options.PARALLELISM) or 1
        self._max_parallelism = self._config.get(execution_options.MAX_PARALLELISM) or DEFAULT_MAX_PARALLELISM
        self._runtime_mode = self._config.get(execution_options.RUNTIME_MODE)
        self._transformations: list[Transformation] = []
        self._slot_sharing_groups: dict[str, Any] = {}  # register_slot_sharing_group: name -> SlotSharingGroup
        self._execution_config = ExecutionConfig(self)
        self._checkpoint_config = CheckpointConfig(self._config)  # a view over self._config

    @staticmethod
    def get_execution_environment(configuration: Configuration | dict[str, Any] | None = None) -> StreamExecutionEnvironment:
        """A new environment; the runner's context configuration (e.g. `millrace run -p 2`) is the base."""
        from runtime.api.execution import context_config

        base = Configuration(context_config())
        if configuration is not None:
            base.add_all(configuration)
            validate_fault_tolerance_config(configuration)
        return StreamExecutionEnvironment(base)

    # -- settings --------------------------------------------------------------------------------
    def set_parallelism(self, parallelism: int) -> StreamExecutionEnvironment:
        if not isinstance(parallelism, int) or parallelism < 1:
            raise InvalidProgramError(f"set_parallelism(): parallelism must be a positive int, got {parallelism!r}")
        self._parallelism = parallelism
        return self

    def get_parallelism(self) -> int:
        return self._parallelism

    def set_max_parallelism(self, max_parallelism: int) -> StreamExecutionEnvironment:
        if not isinstance(max_parallelism, int) or not 1 <= max_parallelism <= (1 << 15):
            raise InvalidProgramError(f"set_max_parallelism(): must be in [1, 32768], got {max_parallelism!r}")
        self._max_parallelism = max_parallelism
        return self

    def get_max_parallelism(self) -> int:
        return self._max_parallelism

    def set_runtime_mode(self, execution_mode: RuntimeExecutionMode | str) -> StreamExecutionEnvironment:
        try:
            self._runtime_mode = RuntimeExecutionMode(str(getattr(execution_mode, "value", execution_mode)).upper())
        except ValueError:
            raise InvalidProgramError(f"set_runtime_mode(): unknown mode {execution_mode!r}; use STREAMING, BATCH or AUTOMATIC") from None
        return self

    def get_runtime_mode(self) -> RuntimeExecutionMode:
        return self._runtime_mode

    def get_config(self) -> ExecutionConfig:
        return self._execution_config

    def get_configuration(self) -> Configuration:
        return self._config

    def configure(self, configuration: Configuration | dict[str, Any]) -> StreamExecutionEnvironment:
        """Apply Flink options, including execution.checkpointing.*, state.backend.type,
        restart-strategy.* and jobmanager.execution.failover-strategy (validated here)."""
        validate_fault_tolerance_config(Configuration(configuration))
        self._config.add_all(configuration)
        c = self._config.to_dict()
        self._parallelism = execution_options.PARALLELISM.get_optional(c) or self._parallelism
        self._max_parallelism = execution_options.MAX_PARALLELISM.get_optional(c) or self._max_parallelism
        mode = execution_options.RUNTIME_MODE.get_optional(c)
        if mode is not None:
            self.set_runtime_mode(mode)
        return self

    def disable_operator_chaining(self) -> StreamExecutionEnvironment:
        self._config.set(execution_options.OPERATOR_CHAINING, False)
        return self

    def is_chaining_enabled(self) -> bool:
        return self._config.get(execution_options.OPERATOR_CHAINING)

    def set_buffer_timeout(self, timeout_millis: int) -> StreamExecutionEnvironment:
        # passed to the network layer through the job config (Flink's execution.buffer-timeout)
        execution_options.BUFFER_TIMEOUT.validate(timeout_millis)
        self._config.set_integer(execution_options.BUFFER_TIMEOUT.key, timeout_millis)
        return self

    def get_buffer_timeout(self) -> int:
        """Milliseconds; unset: the TaskManagers' default, 100 (Flink's)."""
        timeout = self._config.get(execution_options.BUFFER_TIMEOUT)
        return 100 if timeout is None else timeout

    # -- fault tolerance -------------------------------------------------------------------------
    def enable_checkpointing(
        self, interval: int, mode: CheckpointingMode | str | None = None
    ) -> StreamExecutionEnvironment:
        """Checkpoint every `interval` ms (at least 10); `mode` EXACTLY_ONCE (the default) or
        AT_LEAST_ONCE; None keeps the mode configured so far (execution.checkpointing.*)."""
        cc = self._checkpoint_config
        if mode is not None:
            cc.set_checkpointing_mode(mode)  # validated first: a bad mode leaves nothing half-set
        cc.set_checkpoint_interval(interval)
        return self

    def get_checkpoint_config(self) -> CheckpointConfig:
        return self._checkpoint_config

    def get_checkpoint_interval(self) -> int:
        """Milliseconds between checkpoints; -1 when checkpointing is disabled."""
        return self._checkpoint_config.get_checkpoint_interval()

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._checkpoint_config.get_checkpointing_mode()

    def set_state_backend(self, state_backend: StateBackend) -> StreamExecutionEnvironment:
        """HashMapStateBackend() (state.backend.type: hashmap) or EmbeddedRocksDBStateBackend() (rocksdb)."""
        if not isinstance(state_backend, StateBackend) or not state_backend.TYPE:
            raise InvalidProgramError(
                f"set_state_backend(): expected HashMapStateBackend() or EmbeddedRocksDBStateBackend(), "
                f"got {type(state_backend).__name__}"
            )
        for key in state_options.STATE_BACKEND.deprecated_keys:  # an older key would otherwise still be read
            self._config.remove_config(key)
        state_backend._apply(self._config)
        return self

    def get_state_backend(self) -> StateBackend | None:
        """The configured state backend, or None (then hashmap)."""
        return state_backend_from_config(self._config)

    def enable_changelog_state_backend(self, enabled: bool) -> StreamExecutionEnvironment:
        """Incremental checkpoints by a changelog over periodic materialization (state.changelog.enabled;
        the RocksDB backend: see docs/fault_tolerance.md)."""
        self._config.set(state_options.CHANGELOG_ENABLED, bool(enabled))
        return self

    def is_changelog_state_backend_enabled(self) -> bool | None:
        """PyFlink: None when never set (then the cluster's default, off)."""
        return self._config.get(state_options.CHANGELOG_ENABLED)

    def set_restart_strategy(
        self, restart_strategy_configuration: RestartStrategyConfiguration
    ) -> StreamExecutionEnvironment:
        """Replace the job's restart strategy (restart-strategy.* keys); fall_back_restart() clears them."""
        if not isinstance(restart_strategy_configuration, RestartStrategyConfiguration):
            raise InvalidProgramError(
                "set_restart_strategy(): expected a RestartStrategies.*() configuration (no_restart, "
                "fixed_delay_restart, failure_rate_restart, exponential_delay_restart, fall_back_restart), "
                f"got {type(restart_strategy_configuration).__name__}"
            )
        for key in [k for k in self._config.key_set() if is_restart_strategy_key(k)]:
            self._config.remove_config(key)
        self._config.add_all(restart_strategy_configuration.to_configuration())
        return self

    def get_restart_strategy(self) -> RestartStrategyConfiguration:
        """The restart strategy the configuration describes; fall_back_restart() when none is set
        (then: no restart without checkpointing, exponential-delay with it)."""
        return RestartStrategies.from_configuration(self._config.to_dict())

    # -- sources ---------------------------------------------------------------------------------
    def from_collection(self, collection: Sequence[Any], type_info: Any = None) -> DataStream:
        from runtime.api.common.watermark_strategy import WatermarkStrategy
        from runtime.api.connectors.collection import CollectionSource

        if isinstance(collection, (str, bytes)) or not hasattr(collection, "__iter__"):
            raise InvalidProgramError(f"from_collection(): expected a list or tuple, got {type(collection).__name__}")
        return self.from_source(CollectionSource(list(collection), type_info), WatermarkStrategy.no_watermarks(), "Collection Source", type_info)

    def from_sequence(self, start: int, end: int) -> DataStream:
        from runtime.api.common.typeinfo import Types
        from runtime.api.common.watermark_strategy import WatermarkStrategy
        from runtime.api.connectors.generator import NumberSequenceSource

        return self.from_source(NumberSequenceSource(start, end), WatermarkStrategy.no_watermarks(), "Sequence Source", Types.LONG())

    def from_source(self, source: Any, watermark_strategy: Any, source_name: str, type_info: Any = None) -> DataStream:
        from runtime.api.common.watermark_strategy import WatermarkStrategy
        from runtime.api.connectors.base import Source
        from runtime.api.operators.simple import TimestampsAndWatermarksOperator

        if not isinstance(source, Source):
            raise InvalidProgramError(f"from_source(): expected a Source (e.g. DataGeneratorSource), got {type(source).__name__}")
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise InvalidProgramError(f"from_source(): expected a WatermarkStrategy, got {type(watermark_strategy).__name__}")
        out_type = type_info if type_info is not None else source.get_type_info()
        if source.is_split_source:
            # FLIP-27: the reader operator assigns timestamps and generates watermarks per split
            # (Flink's SourceOperator); its enumerator runs on the JobMaster as the coordinator
            from runtime.api.connectors.source import SourceReaderOperator

            st = SourceTransformation(
                name=source_name, operator_factory=functools.partial(SourceReaderOperator, source, watermark_strategy),
                bounded=source.is_bounded(), output_type=out_type,
            )
            st.coordinator_provider = source.coordinator_provider()
            self._mark_non_parallel(source, st)
            return DataStream(self, st)
        st = SourceTransformation(
            name=source_name, operator_factory=source.create_operator, bounded=source.is_bounded(), output_type=out_type
        )
        self._mark_non_parallel(source, st)
        if not watermark_strategy.generates_watermarks and watermark_strategy.timestamp_assigner is None:
            return DataStream(self, st)
        # Flink generates watermarks inside the source operator; Millrace chains a
        # TimestampsAndWatermarksOperator right after it (same parallelism, same chain)
        wt = OneInputTransformation(
            name=f"{source_name}: Timestamps/Watermarks",
            input=st,
            operator_factory=functools.partial(TimestampsAndWatermarksOperator, watermark_strategy),
            output_type=out_type,
            parallelism=st.parallelism,
            parallelism_configured=st.parallelism_configured,
            max_parallelism=st.max_parallelism,
        )
        return DataStream(self, wt, config_transformation=st, mirrors=[wt])

    @staticmethod
    def _mark_non_parallel(source: Any, st: SourceTransformation) -> None:
        if source.max_parallelism() == 1:
            st.parallelism, st.parallelism_configured, st.max_parallelism = 1, True, 1
            # read back by DataStream.set_parallelism(); Transformation (runtime/graph) has no field for it
            st._non_parallel = True  # type: ignore[attr-defined]  # see above

    def add_source(self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None) -> DataStream:
        from runtime.api.common.watermark_strategy import WatermarkStrategy

        return self.from_source(source_func, WatermarkStrategy.no_watermarks(), source_name, type_info)

    # -- compile and run -------------------------------------------------------------------------
    def _add_transformation(self, t: Transformation) -> None:
        self._transformations.append(t)

    def _note_stream(self, t: Transformation) -> None:
        """Remember every stream created, to name dangling operators when there is no sink."""
        if not hasattr(self, "_streams"):
            self._streams: list[Transformation] = []
        self._streams.append(t)

    def _dangling_operator_names(self) -> list[str]:
        streams = getattr(self, "_streams", [])
        consumed = {id(i) for t in streams for i in t.inputs}
        return [t.name for t in streams if id(t) not in consumed and t.inputs is not None]

    def _job_config(self) -> dict[str, str]:
        cfg = self._config.to_dict()
        cfg[PARALLELISM_KEY] = str(self._parallelism)
        cfg[MAX_PARALLELISM_KEY] = str(self._max_parallelism)
        cfg[RUNTIME_MODE_KEY] = self._runtime_mode.value
        # global job parameters are read by RuntimeContext.get_job_parameter(key) from the job config
        for k, v in self._execution_config.get_global_job_parameters().items():
            cfg.setdefault(k, v)
        return cfg

    def get_stream_graph(self, job_name: str | None = None, clear_transformations: bool = False) -> Any:
        from runtime.graph.stream_graph_generator import generate_stream_graph

        if not self._transformations:
            dangling = self._dangling_operator_names()
            where = f": the output of {', '.join(repr(n) for n in dangling)} goes nowhere" if dangling else ""
            raise InvalidProgramError(
                f"job '{job_name or DEFAULT_JOB_NAME}' has no sink{where}; add a sink "
                "(print(), sink_to(), add_sink(), execute_and_collect()) before executing"
            )
        config = self._job_config()
        try:
            validate_fault_tolerance_config(config)
        except ConfigurationError as e:
            raise ConfigurationError(f"job '{job_name or DEFAULT_JOB_NAME}': {e}") from None
        sg = generate_stream_graph(
            list(self._transformations),
            job_name or DEFAULT_JOB_NAME,
            self._parallelism,
            self._max_parallelism,
            self._runtime_mode.value,
            config,
        )
        self._apply_registered_slot_sharing_groups(sg)
        if clear_transformations:
            self._transformations.clear()  # like Flink: a second execute() runs only new sinks
        return sg

    def register_slot_sharing_group(self, slot_sharing_group: Any) -> StreamExecutionEnvironment:
        """PyFlink: the resources of a group that operators join by its name (`.slot_sharing_group("name")`)."""
        from runtime.api.datastream.data_stream import SlotSharingGroup

        if not isinstance(slot_sharing_group, SlotSharingGroup):
            raise InvalidProgramError(f"register_slot_sharing_group(): expected a SlotSharingGroup, got {type(slot_sharing_group).__name__}")
        self._slot_sharing_groups[slot_sharing_group.get_name()] = slot_sharing_group
        return self

    def _apply_registered_slot_sharing_groups(self, sg: Any) -> None:
        for name, group in self._slot_sharing_groups.items():
            spec = group.to_resources()
            for n in sg.nodes.values():
                if n.slot_sharing_group != name:
                    continue
                if n.resources is not None and n.resources != spec:
                    raise InvalidProgramError(
                        f"slot sharing group '{name}' is registered with {spec} but operator '{n.name}' joins it with "
                        f"{n.resources}: give the group its resources in one place"
                    )
                n.resources = spec

    def get_job_graph(self, job_name: str | None = None, clear_transformations: bool = False) -> Any:
        from runtime.graph.job_graph_builder import build_job_graph

        return build_job_graph(self.get_stream_graph(job_name, clear_transformations))

    def get_execution_plan(self) -> str:
        sg = self.get_stream_graph()
        lines = []
        for n in sg.topological_order():
            ins = ", ".join(f"{e.source_id}[{e.partitioner.kind.value}]" for e in n.in_edges)
            lines.append(f"{n.id}: {n.name} (p={n.parallelism}){' <- ' + ins if ins else ''}")
        return "\n".join(lines)

    def execute_async(self, job_name: str | None = None) -> Any:
        """Submit the job and return its JobClient without waiting."""
        from runtime.api.execution import current_executor

        job_graph = self.get_job_graph(job_name, clear_transformations=True)
        return current_executor(job_graph.config or self._job_config()).execute(job_graph)

    def execute(self, job_name: str | None = None) -> Any:
        """Run the job to the end; returns its JobExecutionResult (raises JobExecutionError)."""
        client = self.execute_async(job_name)
        try:
            return client.get_job_execution_result()
        finally:
            close = getattr(client, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        self._transformations.clear()
