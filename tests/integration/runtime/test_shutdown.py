"""A cluster that stops under a running job (Ctrl-C on an embedded run, SIGTERM or DELETE /cluster on
a session cluster) cancels the job and lets it end before its JobMaster stops: the job's Delta
files go with it, as after any cancel."""
from __future__ import annotations

from pathlib import Path

from runtime.api.common import WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy
from runtime.api.connectors.delta import DeltaSink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster, MiniClusterConfig
from tests.waiting import wait_until


def test_closing_the_cluster_under_a_writing_job_leaves_its_new_table_untouched(tmp_path: Path) -> None:
    out = tmp_path / "table"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    source = DataGeneratorSource(lambda i: {"id": i}, 10_000_000, rate_limiter_strategy=RateLimiterStrategy.per_second(20_000))
    env.from_source(source, WatermarkStrategy.no_watermarks(), "ids").sink_to(DeltaSink(str(out)))
    cluster = MiniCluster(MiniClusterConfig(provider="local", tm_log_level="WARNING")).start()
    try:
        client = cluster.submit(env.get_job_graph("writing"))
        # both writers have files open in the table's folder, which no commit references yet
        wait_until(lambda: len(list(out.glob("*.parquet"))) == 2, timeout=60, what="both writers' first files")
        assert client.get_job_status() is JobStatus.RUNNING
    finally:
        cluster.close()
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))
