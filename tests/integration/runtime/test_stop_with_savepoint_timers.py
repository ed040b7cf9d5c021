"""Stop-with-savepoint quiesces every task's processing-time timers at its barrier (Flink: the
synchronous savepoint), not only the held source's.

The watermark operator runs in its own task (after a rebalance), so the source holding after its
barrier does not stop the periodic-watermark timer. Were that timer to fire after the barrier, it
would advance event time and fire windows after their snapshot: output the savepoint still holds
as open windows, emitted again on resume. The sink marks in its output where its snapshot was
taken; nothing may come after that mark, and the stopped run plus the run resumed from the
savepoint give every window exactly once, as the plain-Python reference.
"""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common import Configuration, Time, WatermarkStrategy
from runtime.api.connectors.base import RateLimiterStrategy, Sink
from runtime.api.connectors.generator import DataGeneratorSource
from runtime.api.datastream import ProcessWindowFunction, StreamExecutionEnvironment, TumblingEventTimeWindows
from runtime.api.operators.base import StreamOperator
from runtime.core.states import JobStatus
from runtime.deploy.minicluster import MiniCluster
from tests.integration.runtime.test_savepoints import savepoint
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

N = 4_000  # events: event time 10 ms apart, keys 0 and 1
WINDOW_MS = 100
SNAPSHOT_MARK = "snapshot"


def event(i: int) -> tuple[int, int]:
    return (i % 2, i * 10)


def reference() -> Counter[tuple[int, int, int]]:
    windows = Counter((k, ts - ts % WINDOW_MS) for k, ts in map(event, range(N)))
    return Counter({(k, start, count): 1 for (k, start), count in windows.items()})


class CountPerWindow(ProcessWindowFunction):
    def process(self, key: Any, context: Any, elements: Any) -> Any:
        yield (key, context.window().start, len(list(elements)))


class RecordingWriter(StreamOperator):
    """Appends each window result to a file as it arrives, and a mark when its snapshot is taken.

    Its snapshot takes `snapshot_s` (a slow pre-commit): the savepoint completes that much later,
    so any timer upstream that fires after its barrier has the time to show."""

    def __init__(self, path: str, snapshot_s: float) -> None:
        super().__init__()
        self.path, self.snapshot_s = path, snapshot_s

    def _write(self, line: str) -> None:
        with open(self.path, "a") as f:
            f.write(line + "\n")

    def process_batch(self, batch: Any, input_index: int = 0) -> None:
        for key, start, count in batch.rows():
            self._write(f"{key} {start} {count}")

    def snapshot_state(self, checkpoint_id: int) -> None:
        time.sleep(self.snapshot_s)
        self._write(f"{SNAPSHOT_MARK} {checkpoint_id}")
        return None


class RecordingSink(Sink):
    def __init__(self, path: Path, snapshot_s: float = 0.0) -> None:
        self.path, self.snapshot_s = str(path), snapshot_s

    def create_writer(self) -> StreamOperator:
        return RecordingWriter(self.path, self.snapshot_s)


def program(tmp_path: Path, out: Path, snapshot_s: float, savepoint_path: str | None = None) -> StreamExecutionEnvironment:
    conf = Configuration()
    conf.set_string("state.savepoints.dir", str(tmp_path / "savepoints"))
    conf.set_string("pipeline.auto-watermark-interval", "100 ms")
    if savepoint_path:
        conf.set_string("execution.savepoint.path", savepoint_path)
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    env.set_parallelism(1)
    source = DataGeneratorSource(event, N, rate_limiter_strategy=RateLimiterStrategy.per_second(1_000, batch_seconds=0.002))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "events").uid("events")
        .rebalance()  # the watermark operator gets a task of its own: the held source does not stop its timer
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e[1]))
        .uid("watermarks")
        .key_by(lambda e: e[0])
        .window(TumblingEventTimeWindows.of(Time.milliseconds(WINDOW_MS)))
        .process(CountPerWindow()).uid("windows")
        .sink_to(RecordingSink(out, snapshot_s)).uid("recorder")
    )
    return env


def results(path: Path) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """(window results before the snapshot mark, those after it)."""
    before: list[tuple[int, int, int]] = []
    after: list[tuple[int, int, int]] = []
    seen_mark = False
    for line in path.read_text().splitlines():
        if line.startswith(SNAPSHOT_MARK):
            seen_mark = True
            continue
        key, start, count = map(int, line.split())
        (after if seen_mark else before).append((key, start, count))
    return before, after


def test_stop_with_savepoint_fires_no_window_after_the_snapshot_of_a_downstream_task(mini_cluster: MiniCluster, tmp_path: Path) -> None:
    first = tmp_path / "first.txt"
    client = mini_cluster.submit(program(tmp_path, first, snapshot_s=0.4).get_job_graph("windows-then-stop"))
    wait_until(lambda: first.exists() and len(first.read_text().splitlines()) >= 10, timeout=60, what="the first windows fired")
    st = savepoint(mini_cluster, client.job_id, stop=True)
    assert st.status == "COMPLETED", st.failure
    assert client.get_job_execution_result(timeout=60).status is JobStatus.FINISHED
    before, after = results(first)
    assert SNAPSHOT_MARK in first.read_text(), "the sink took the stop-with-savepoint snapshot"
    assert not after, f"{len(after)} window results emitted after the snapshot (a timer fired after the barrier): {after[:5]}"
    # what the savepoint holds as open windows fires once, in the resumed run
    second = tmp_path / "second.txt"
    resumed = mini_cluster.submit(program(tmp_path, second, snapshot_s=0.0, savepoint_path=st.location).get_job_graph("windows-resumed"))
    assert resumed.get_job_execution_result(timeout=120).status is JobStatus.FINISHED
    got = Counter(before + results(second)[0])
    repeated = sorted(r for r, c in got.items() if c > 1)
    assert not repeated, f"windows emitted twice (before the stop and on resume): {repeated[:5]}"
    assert got == reference()
