"""The chaos benchmark, small: the main job on Spark executors, TaskManagers SIGKILLed, output exactly once."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _chaos_module():
    spec = importlib.util.spec_from_file_location("millrace_chaos", ROOT / "benchmarks" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_main_job_survives_killed_spark_task_managers_with_exactly_once_delta_output(spark, tmp_path) -> None:
    chaos = _chaos_module()
    args = chaos.parse_args(["--events", "60000", "--rate", "20000", "--kills", "2", "--provider", "spark", "--seed", "3", "--output", str(tmp_path / "out")])
    out = chaos.run(args, spark=spark)
    assert out["status"] == "FINISHED"
    assert out["kills"] == 2 and out["restarts"] >= 2
    assert out["duplicate_keys"] == 0 and out["missing_keys"] == 0 and out["wrong_values"] == 0
    assert out["rows"] == len(chaos.windowed_sum.reference(60000))
