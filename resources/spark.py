"""SparkResource: dagster-pyspark's PySparkResource, built by the project's one session factory.

The session comes from runtime.deploy.spark_session.build_spark_session (Delta configured, jars
resolved by Spark, driver on loopback), never from a second builder, so Dagster runs, the CLI and
the tests get the same Spark. It starts lazily, on the first `spark_session` access: a run whose
Millrace job uses local-process TaskManagers never pays the 5-10 s Spark start.
"""
from typing import Any

from dagster import InitResourceContext
from dagster_pyspark import PySparkResource
from pydantic import Field

from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session


class SparkResource(PySparkResource):
    """A SparkSession with Delta Lake; in embedded mode Millrace's TaskManagers run on its executors."""

    master: str = Field(
        default="local[4]",
        description=(
            "Spark master URL: local[N] (N cores; every TaskManager holds one Spark task, so N must be at "
            "least the number of TaskManagers a job needs), spark://host:port, yarn, k8s://..."
        ),
    )
    app_name: str = Field(default="millrace-dagster", description="Spark application name")
    warehouse_dir: str = Field(
        default="warehouse/spark-sql", description="spark.sql.warehouse.dir (a relative path is under the run's working directory)"
    )
    driver_host: str = Field(default="127.0.0.1", description="address executors use to reach the driver (loopback by default)")
    log_level: str = Field(default="WARN", description="Spark's log level")
    spark_config: dict[str, Any] = Field(
        default={}, description="extra Spark configuration, e.g. {'spark.executor.memory': '2g'}; wins over the settings above"
    )

    def setup_for_execution(self, context: InitResourceContext) -> None:
        # lazy on purpose (PySparkResource starts the session here): see spark_session
        pass

    def session_config(self) -> SparkSessionConfig:
        return SparkSessionConfig(
            master=self.master,
            app_name=self.app_name,
            warehouse_dir=self.warehouse_dir,
            driver_host=self.driver_host,
            log_level=self.log_level,
            extra_conf={str(k): str(v) for k, v in self.spark_config.items()},
        )

    @property
    def spark_session(self) -> Any:
        """The SparkSession (started on first use; getOrCreate, so one per process)."""
        if self._spark_session is None:
            self._spark_session = build_spark_session(self.session_config())
        return self._spark_session

    @property
    def is_started(self) -> bool:
        return self._spark_session is not None
