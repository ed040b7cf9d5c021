"""JobManager failover with TaskManagers on Spark (benchmarks/ha_failover.py, small): two HA
JobManagers on one ZooKeeper, each with its own Spark application; the leader's whole process
group (JobManager, Spark driver JVM, executors) SIGKILLed while the checkpointed, throttled main
job runs; the standby leads, recovers the job from its latest checkpoint on its own Spark
executors, and the Delta table equals the reference row for row."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _benchmark():
    spec = importlib.util.spec_from_file_location("millrace_ha_failover", ROOT / "benchmarks" / "ha_failover.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_standby_recovers_the_main_job_on_its_spark_executors_after_the_leader_is_killed(tmp_path: Path) -> None:
    bench = _benchmark()
    args = bench.parse_args(["--events", "40000", "--rate", "5000", "--kills", "1", "--provider", "spark",
                             "--session-timeout-ms", "4000", "--workdir", str(tmp_path)])
    out = bench.run(args)
    assert out["status"] == "FINISHED" and out["jm_kills"] == 1 and out["leader_changes"] == 1, out
    assert out["duplicate_keys"] == 0 and out["missing_keys"] == 0 and out["wrong_values"] == 0 and out["verified"], out
    logs = "".join(p.read_text() for p in tmp_path.glob("jm-*/jobmanager-session.log"))
    assert "restoring checkpoint" in logs and "(recovered by a new leader)" in logs
    assert "TaskManagers on spark" in logs or "Spark driver up" in logs
