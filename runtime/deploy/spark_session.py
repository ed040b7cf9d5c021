"""The one SparkSession factory: Delta configured, its jars resolved at set-up time (else by Spark from Maven Central).

Used by the CLI, tests and the Dagster resources alike.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from pydantic import BaseModel, Field

# delta-spark's Python package version may run ahead of Maven Central; pin the jars we know exist.
DELTA_JAR_VERSION = "4.4.0"
SCALA_BINARY = "2.13"


class SparkSessionConfig(BaseModel):
    master: str = Field("local[2]", description="Spark master URL: local[N], spark://host:port, yarn, k8s://...")
    app_name: str = "millrace"
    warehouse_dir: str = Field(default_factory=lambda: str(Path.cwd() / "warehouse"), description="spark.sql.warehouse.dir")
    driver_host: str = Field("127.0.0.1", description="where executors reach the driver; loopback by default")
    extra_conf: dict[str, str] = Field(default_factory=dict)
    log_level: str = "WARN"
    quiet: bool = Field(
        True, description="Spark's start-up chatter off (a log4j2 profile of Millrace's), unless $SPARK_CONF_DIR or extraJavaOptions configure log4j"
    )


def delta_maven_coordinates() -> str:
    import pyspark

    major_minor = ".".join(pyspark.__version__.split(".")[:2])
    return f"io.delta:delta-spark_{major_minor}_{SCALA_BINARY}:{DELTA_JAR_VERSION}"


def kill_spark_jvms(grace_s: float = 3.0) -> int:
    """Stop the Spark JVMs this process started (its child processes running Spark's launcher or
    JVM); their Python workers end with them. Returns how many were signalled. Linux /proc only."""
    import signal
    import time

    me = os.getpid()
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == me and (b"org.apache.spark" in cmd or b"spark-submit" in cmd or b"pyspark" in cmd):
            pids.append(int(entry))
    signalled = len(pids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace_s
    while pids and time.monotonic() < deadline:
        alive = []
        for p in pids:
            try:
                done, _ = os.waitpid(p, os.WNOHANG)
            except ChildProcessError:
                continue
            if not done:
                alive.append(p)
        pids = alive
        time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except OSError:
            pass
    return signalled


def _has_log4j_config() -> bool:
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        return False
    return any((Path(conf_dir) / f).exists() for f in ("log4j2.properties", "log4j2.xml"))


def is_loopback_standalone(master: str) -> bool:
    """A standalone master on this machine (infra/spark_standalone.sh): size Spark SQL as for local mode.

    Nothing else is standalone-specific: an executor takes all cores of its worker unless told
    otherwise, so with 1-core workers every TaskManager (one long-running 1-CPU task) gets an
    executor of its own; executors run the driver's PYSPARK_PYTHON (same machine: the venv, with
    Millrace installed) and fetch the Delta jars that spark.jars.packages resolved on the driver
    from its file server. spark.cores.max / spark.executor.cores / spark.executor.memory for a
    shared cluster come from extra_conf or $SPARK_CONF_DIR/spark-defaults.conf (docs/deploy.md).
    """
    if not master.startswith("spark://"):
        return False
    hosts = [h.rsplit(":", 1)[0] for h in master[len("spark://"):].split(",")]  # HA masters: a,b
    return all(h in ("127.0.0.1", "localhost", "[::1]") for h in hosts)


def build_spark_session(cfg: SparkSessionConfig | None = None):
    """Get or create the SparkSession with Delta Lake enabled."""
    from pyspark.sql import SparkSession

    cfg = cfg or SparkSessionConfig()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", cfg.driver_host)
    from runtime.deploy.spark_jars import jvm_stderr_filtered, quiet_log4j_options, resolved_jars

    coordinates = delta_maven_coordinates()
    jars = resolved_jars(coordinates)  # resolved at set-up time: no Ivy run (and its output) per session
    builder = (
        SparkSession.builder.master(cfg.master)
        .appName(cfg.app_name)
        .config(*(("spark.jars", ",".join(jars)) if jars else ("spark.jars.packages", coordinates)))
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.sql.warehouse.dir", cfg.warehouse_dir)
        .config("spark.driver.host", cfg.driver_host)
        .config("spark.driver.bindAddress", cfg.driver_host)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # TaskManagers are long-running Spark tasks: do not kill or speculate them
        .config("spark.speculation", "false")
        .config("spark.task.maxFailures", "4")
        .config("spark.python.worker.reuse", "true")
    )
    if cfg.master.startswith("local") or is_loopback_standalone(cfg.master):
        # Spark's defaults (200 shuffle partitions, 50 Delta snapshot partitions) are sized for
        # clusters; on one machine they turn a small Delta read into hundreds of tiny tasks
        # (a Delta count on the 2-worker loopback standalone cluster: 106 s with them, see docs/deploy.md)
        builder = builder.config("spark.sql.shuffle.partitions", "8").config("spark.databricks.delta.snapshotPartitions", "2")
    extra = dict(cfg.extra_conf)
    java_options = extra.pop("spark.driver.extraJavaOptions", "")
    if cfg.quiet and "log4j" not in java_options and not _has_log4j_config():
        java_options = f"{java_options} {quiet_log4j_options()}".strip()
    if java_options:
        builder = builder.config("spark.driver.extraJavaOptions", java_options)
    for k, v in extra.items():
        builder = builder.config(k, v)
    try:
        if cfg.quiet and SparkSession.getActiveSession() is None:
            with jvm_stderr_filtered():
                spark = builder.getOrCreate()
        else:
            spark = builder.getOrCreate()
    except BaseException:
        # e.g. Ctrl-C while the JVM starts: PySpark starts it ignoring SIGINT and has not handed
        # it over yet, so nothing else would ever stop it
        kill_spark_jvms()
        raise
    spark.sparkContext.setLogLevel(cfg.log_level)
    return spark
