"""FileSource and FileSink on a cluster: word count from files to files, and exactly once through a failure."""
from __future__ import annotations

import collections
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.api.common import Duration, Encoder, WatermarkStrategy
from runtime.api.connectors.file_sink import FileSink, OutputFileConfig, RollingPolicy
from runtime.api.datastream.connectors.file_system import BucketAssigner
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.integration.runtime.test_fault_tolerance import FailOnce, env_with_checkpoints, id_source

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
PROGRAM = Path(__file__).parent / "pyflink_programs" / "word_count_files.py"


def finished_files(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def hidden_files(base: Path) -> list[Path]:
    return sorted(p for p in base.rglob(".*") if p.is_file())


def test_word_count_reading_files_with_file_source_and_writing_with_file_sink(tmp_path: Path) -> None:
    words = ["alpha", "beta", "gamma", "delta", "eps"]
    src = tmp_path / "in"
    texts: dict[str, str] = {}
    for f in range(6):  # files in a directory tree, one hidden (skipped, as Flink does)
        lines = [" ".join(words[(f * 7 + i * 3 + j) % 5] for j in range(i % 4 + 1)) for i in range(200)]
        texts[f"d{f % 2}/part{f}.txt"] = "\n".join(lines) + "\n"
    texts[".hidden.txt"] = "alpha alpha\n"
    for rel, text in texts.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "runtime.cli", "run", str(PROGRAM), "--provider", "local", "--input", str(src), "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = collections.Counter(w for rel, t in texts.items() if not rel.startswith(".") for w in t.split())
    files = finished_files(out)
    assert files and all(f.name.startswith("prefix-") and f.name.endswith(".txt") for f in files)
    got = [eval(line) for f in files for line in f.read_text().splitlines()]  # noqa: S307 - our own test output
    assert sorted(got) == sorted(expected.items())
    assert hidden_files(out) == []


def test_file_sink_is_exactly_once_through_a_failure_with_checkpoints(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    n = 40_000
    env = env_with_checkpoints(tmp_path, 2)
    sink = (
        FileSink.for_row_format(str(tmp_path / "out"), Encoder.simple_string_encoder())
        .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy())
        .with_bucket_assigner(BucketAssigner.base_path_assigner())
        .with_output_file_config(OutputFileConfig.builder().with_part_suffix(".csv").build())
        .build()
    )
    (
        env.from_source(id_source(n, 20_000), WatermarkStrategy.no_watermarks(), "ids")
        .map_batches(FailOnce(n // 2, tmp_path / "failed-once"))
        .map(lambda r: r.id if hasattr(r, "id") else r["id"])
        .sink_to(sink)
    )
    client = mini_cluster.submit(env.get_job_graph("ids-to-files"))
    result = client.get_job_execution_result(timeout=120)
    assert result.status is JobStatus.FINISHED and result.accumulators["restarts"] == 1
    got = sorted(int(line) for f in finished_files(tmp_path / "out") for line in f.read_text().splitlines())
    assert got == list(range(n))  # none lost, none twice
    assert hidden_files(tmp_path / "out") == []  # no in-progress or pending part left
    assert len(finished_files(tmp_path / "out")) > 2  # one part per subtask and checkpoint


def test_a_monitored_directory_is_read_as_files_arrive(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    from runtime.api.datastream import StreamExecutionEnvironment
    from runtime.api.datastream.connectors.file_system import FileSource, StreamFormat
    from runtime.api.execution import use_executor

    src = tmp_path / "in"
    src.mkdir()
    (src / "first.txt").write_text("a\nb\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).monitor_continuously(Duration.of_millis(100)).build()
    assert not source.is_bounded()
    with use_executor(mini_cluster.executor()):
        it = env.from_source(source, WatermarkStrategy.no_watermarks(), "files").execute_and_collect("monitor")
        got = [next(it), next(it)]
        (src / ".second.txt.tmp").write_text("c\nd\n")
        os.rename(src / ".second.txt.tmp", src / "second.txt")  # appears complete (hidden while written)
        got += [next(it), next(it)]
        it.close()
    assert sorted(got) == ["a", "b", "c", "d"]
