"""with_idleness on a cluster: a source subtask without data stops holding back event time."""
from __future__ import annotations

from pathlib import Path

import pytest

from runtime.api.common import Duration, Time, Types, WatermarkStrategy
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.connectors.file_system import FileSource, StreamFormat
from runtime.api.datastream.window import TumblingEventTimeWindows
from runtime.api.execution import use_executor
from runtime.deploy.minicluster import MiniCluster

pytestmark = pytest.mark.integration


def windows_job(env: StreamExecutionEnvironment, src: Path, idleness: bool):
    wm = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda line, _t: int(line.split(",")[1]))
    if idleness:
        wm = wm.with_idleness(Duration.of_millis(300))
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(src)).monitor_continuously(Duration.of_millis(100)).build()
    return (
        env.from_source(source, wm, "lines")
        .map(lambda line: (line.split(",")[0], int(line.split(",")[1])), output_type=Types.TUPLE([Types.STRING(), Types.LONG()]))
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(100)))
        .reduce(lambda a, b: (a[0], max(a[1], b[1])))
    )


def test_an_idle_source_subtask_does_not_hold_back_windows(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    # one file: one source subtask reads it, the other stays without records (its watermark: none)
    (src / "events-0.csv").write_text("a,10\na,50\nb,70\na,150\na,250\n")
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    with use_executor(mini_cluster.executor()):
        it = windows_job(env, src, idleness=True).execute_and_collect("idle subtask")
        got = sorted([next(it) for _ in range(3)])  # windows [0,100) of a and b, [100,200) of a
        it.close()
    assert got == [("a", 50), ("a", 150), ("b", 70)]
