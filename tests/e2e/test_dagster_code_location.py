"""The code location loads and validates, and its asset materializes by running a Millrace job."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dagster import materialize
from deltalake import DeltaTable

from pipelines.definitions import windowed_sum_table
from pipelines.jobs import windowed_sum
from resources import DeltaWarehouseResource, MillraceClusterResource, SparkResource

ROOT = Path(__file__).resolve().parents[2]


def test_workspace_validates(tmp_path: Path) -> None:
    env = dict(os.environ, DAGSTER_HOME=str(tmp_path))
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


def test_asset_materializes_by_running_the_job(tmp_path: Path) -> None:
    out = str(tmp_path / "ws")
    result = materialize(
        [windowed_sum_table],
        resources={
            "millrace": MillraceClusterResource(provider="local", spark=SparkResource()),
            "warehouse": DeltaWarehouseResource(base_path=str(tmp_path)),
        },
        run_config={"ops": {"windowed_sum_table": {"config": {"events": 20000, "parallelism": 2, "output": out}}}},
    )
    assert result.success
    mat = result.asset_materializations_for_node("windowed_sum_table")[0]
    assert mat.metadata["row_count"].value == len(windowed_sum.reference(20000))
    assert DeltaTable(out).to_pyarrow_table().num_rows == len(windowed_sum.reference(20000))
