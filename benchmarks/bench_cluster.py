"""What the keyed-state benchmarks share: a MiniCluster on local processes or Spark, and the key generator."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator

import cloudpickle

from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from runtime.rpc import messages as m

STATE_TASK_HEAP_MB = 3072

# benchmarks/ is not on the TaskManagers' path: functions from here travel by value
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class KeyOf:
    """Record i of the generator: (i % keys, 1), so a keyed reduce holds `keys` entries."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, i: int) -> tuple[int, int]:
        return (i % self.keys, 1)


@contextlib.contextmanager
def bench_cluster(provider: str, app_name: str) -> Iterator[MiniCluster]:
    """A warm MiniCluster for a benchmark's runs; with provider "spark", TaskManagers on local[2] executors."""
    spark = None
    if provider == "spark":
        from runtime.deploy.spark_session import SparkSessionConfig, build_spark_session

        spark = build_spark_session(SparkSessionConfig(master="local[2]", app_name=app_name))
    try:
        # 1,000,000 keys of heap state (plus a snapshot being written) are ~800 MB of Python objects:
        # TaskManagers sized for it, as a Flink user sets taskmanager.memory.task.heap.size (docs/memory.md)
        profile = m.ResourceProfile(cpu_cores=1.0, task_heap_mb=STATE_TASK_HEAP_MB, managed_memory_mb=256)
        with MiniCluster(MiniClusterConfig(provider=provider, tm_log_level="WARNING", task_manager_profile=profile), spark=spark) as cluster:
            yield cluster
    finally:
        if spark is not None:
            spark.stop()
