"""The Dagster code location: Definitions assembled in one place (loaded by workspace.yaml).

Minimal for now: one asset whose materialization runs the main Millrace job on the embedded
cluster. Resources, sensors, schedules and the session cluster arrive with the Dagster issue.
"""

from dagster import Config, Definitions, MaterializeResult, MetadataValue, asset
from pydantic import Field

from pipelines.jobs import windowed_sum
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.execution import use_executor
from runtime.deploy.embedded import EmbeddedExecutor


class WindowedSumConfig(Config):
    events: int = Field(2_000_000, description="number of generated events")
    parallelism: int = Field(2, description="parallelism of the Millrace job")
    output: str = Field("warehouse/windowed_sum", description="path of the output Delta table")
    provider: str = Field("spark", description="where TaskManagers run: 'spark' (executors) or 'local' (processes)")


@asset(description="Per-user count and sum over 1 s event-time windows (Millrace job windowed_sum), a Delta table.")
def windowed_sum_table(context, config: WindowedSumConfig) -> MaterializeResult:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(config.parallelism)
    windowed_sum.build(env, config.events, config.output)
    with use_executor(EmbeddedExecutor(provider=config.provider)):
        result = env.execute("windowed_sum")
    context.log.info(f"Millrace job {result.job_id} finished in {result.net_runtime_ms} ms")
    acc = result.accumulators
    return MaterializeResult(
        metadata={
            "millrace_job_id": result.job_id,
            "duration_ms": result.net_runtime_ms,
            "delta_table": MetadataValue.path(str(acc.get("delta_table", config.output))),
            "delta_version": acc.get("delta_version"),
            "row_count": acc.get("delta_records", 0),
        }
    )


defs = Definitions(assets=[windowed_sum_table])
