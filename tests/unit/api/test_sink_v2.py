"""Sink V2's generic two-phase commit, shown with the FileSink on the sink harness
(runtime.api.connectors.sink.testing): re-offered committables, restore, winner-only attempts."""
from __future__ import annotations

from pathlib import Path

import pytest

from runtime.api.common.serialization import Encoder
from runtime.api.connectors.file_sink import BucketAssigner, FileSink, FileWriter, OutputFileConfig, RollingPolicy
from runtime.api.connectors.sink import SinkWriterContext
from runtime.api.connectors.sink.testing import SinkHarness
from tests.harness import obj

pytestmark = pytest.mark.unit


def _sink(base: Path) -> FileSink:
    return (FileSink.for_row_format(str(base), Encoder.simple_string_encoder())
            .with_bucket_assigner(BucketAssigner.base_path_assigner())
            .with_rolling_policy(RollingPolicy.on_checkpoint_rolling_policy()).build())


def _finished(base: Path) -> list[str]:
    return sorted(line for p in base.rglob("*") if p.is_file() and not p.name.startswith(".") for line in p.read_text().splitlines())


def _hidden(base: Path) -> list[str]:
    return sorted(p.name for p in base.rglob(".*") if p.is_file())


def test_an_aborted_checkpoints_parts_go_with_the_next_and_nothing_is_finished_twice(tmp_path: Path) -> None:
    h = SinkHarness(_sink(tmp_path / "out"), 1)
    h.write(0, obj(["a", "b"]))
    h.checkpoint(1)  # aborted: never completed
    h.write(0, obj(["c"]))
    held2 = h.checkpoint(2)
    assert len(held2[0]) == 2  # checkpoint 1's part is offered again
    h.coordinator.notify_checkpoint_complete(2, held2)  # the writer has not heard of it yet
    assert _finished(tmp_path / "out") == ["a", "b", "c"]
    h.write(0, obj(["d"]))
    held3 = h.checkpoint(3)  # offers 1's and 2's parts again: finishing them again is a no-op
    h.complete(3, held3)
    h.write(0, obj(["e"]))
    assert h.finish()["file_sink_files"] == 4
    assert _finished(tmp_path / "out") == ["a", "b", "c", "d", "e"] and _hidden(tmp_path / "out") == []


def test_a_restart_finishes_the_restored_checkpoint_and_removes_what_came_after(tmp_path: Path) -> None:
    out = tmp_path / "out"
    h = SinkHarness(_sink(out), 2)
    h.write(0, obj(["a"]))
    h.write(1, obj(["b"]))
    held = h.checkpoint(1)  # completed, but the JobManager fails before the commit
    h.write(0, obj(["late"]))  # after the checkpoint: lost with the failure, written again after the restart
    h.checkpoint(2)
    h.restart(1, held)
    assert _finished(out) == ["a", "b"] and _hidden(out) == []  # checkpoint 1 finished; 2's parts and the rest gone
    h.write(0, obj(["late"]))
    h.finish()
    assert _finished(out) == ["a", "b", "late"]


def test_only_the_winning_attempts_output_is_finished_and_a_cancelled_job_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    h = SinkHarness(_sink(out), 1)
    h.write(0, obj(["slow"]))
    h.fail(0)  # the attempt lost (e.g. to a speculative one): the scheduler gave up on it
    h.attempts[0] += 1
    h.writers[0] = h._open(0, None)
    h.write(0, obj(["fast"]))
    h.finish()
    assert _finished(out) == ["fast"] and _hidden(out) == []
    other = SinkHarness(_sink(tmp_path / "cancelled"), 2)
    other.write(0, obj(["x"]))
    other.checkpoint(1)  # never completed
    other.write(1, obj(["y"]))
    other.cancel()
    assert _finished(tmp_path / "cancelled") == [] and _hidden(tmp_path / "cancelled") == []


def test_a_writer_learns_the_checkpoint_its_attempt_restores_from(tmp_path: Path) -> None:
    seen: list[int | None] = []

    class _Recording(FileSink):
        def create_sink_writer(self, context: SinkWriterContext) -> FileWriter:
            seen.append(context.restored_checkpoint_id)
            return super().create_sink_writer(context)

    sink = _Recording(str(tmp_path / "out"), Encoder.simple_string_encoder(), OutputFileConfig(), RollingPolicy.on_checkpoint_rolling_policy(),
                      BucketAssigner.base_path_assigner())
    h = SinkHarness(sink, 2)
    held = h.checkpoint(7)
    h.restart(7, held)
    h.restart(None, [])
    h.cancel()
    assert seen == [None, None, 7, 7, None, None]
