"""FileSource on FLIP-27, on the connector harnesses: every line exactly once, bounded or monitored,
through a checkpoint restored at another parallelism."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from runtime.api.connectors.file_source import FileSource, FileSplit, StreamFormat
from runtime.api.connectors.source.testing import SourceHarness, TestingReaderContext, TestingSplitEnumeratorContext
from runtime.core.errors import InvalidProgramError
from runtime.core.operators import InputStatus

pytestmark = pytest.mark.unit


def _files(d: Path, n: int, lines: int) -> list[str]:
    d.mkdir(exist_ok=True)
    out = []
    for k in range(n):
        (d / f"f{k}.txt").write_text("".join(f"{k}-{i}\n" for i in range(lines)))
        out += [f"{k}-{i}" for i in range(lines)]
    (d / "_in-progress").write_text("hidden\n")  # a sink's in-progress file: never read
    return out


def _source(d: Path, lines_per_batch: int = 4, monitor_ms: int | None = None) -> FileSource:
    b = FileSource.for_record_stream_format(StreamFormat.text_line_format(), str(d))
    if monitor_ms:
        b.monitor_continuously(monitor_ms)
    b._lines = lines_per_batch
    return b.build()


@pytest.mark.parametrize("parallelism", [1, 2, 3])
def test_bounded_reads_every_line_once_and_ends(tmp_path: Path, parallelism: int) -> None:
    expected = _files(tmp_path / "in", 4, 10)
    h = SourceHarness(_source(tmp_path / "in"), parallelism)
    h.run_until_idle()
    assert all(s is InputStatus.END_OF_INPUT for s in h.status.values())
    assert sorted(h.rows()) == sorted(expected)


def test_a_checkpoint_mid_file_restores_at_another_parallelism(tmp_path: Path) -> None:
    expected = _files(tmp_path / "in", 3, 10)
    source = _source(tmp_path / "in", lines_per_batch=4)
    h = SourceHarness(source, 2)
    h.step()
    h.step()
    cp = h.checkpoint()
    assert any(s.offset > 0 for splits in cp.reader_splits.values() for s in splits)  # in the middle of a file
    before = h.rows()
    for p in (1, 3):
        after = SourceHarness(source, p, cp)
        after.run_until_idle()
        assert sorted(before + after.rows()) == sorted(expected), p


def test_monitoring_finds_new_files_once_and_keeps_what_it_found_in_its_state(tmp_path: Path) -> None:
    d = tmp_path / "in"
    expected = _files(d, 1, 3)
    source = _source(d, monitor_ms=50)
    h = SourceHarness(source, 2)
    h.run_until_idle()
    assert sorted(h.rows()) == sorted(expected)
    assert all(s is InputStatus.NOTHING_AVAILABLE for s in h.status.values())  # unbounded: waits
    (d / "g.txt").write_text("new-0\nnew-1\n")
    h.discover()
    h.run_until_idle()
    cp = h.checkpoint()
    assert str(d / "g.txt") in pickle.loads(cp.enumerator).discovered
    h.discover()  # listed again: nothing read twice
    h.run_until_idle()
    assert sorted(h.rows()) == sorted(expected + ["new-0", "new-1"])
    restored = SourceHarness(source, 1, cp)
    restored.discover()
    restored.run_until_idle()
    assert restored.rows() == []  # the restored enumerator knows g.txt


def test_a_failed_readers_files_go_out_again_and_bad_state_is_refused(tmp_path: Path) -> None:
    _files(tmp_path / "in", 2, 2)
    source = _source(tmp_path / "in")
    ctx = TestingSplitEnumeratorContext(1)
    enum = source.create_enumerator(ctx)
    ctx.register_reader(0)
    enum.handle_split_request(0, None)
    got = ctx.take_assignments(0)
    assert [Path(s.path).name for s in got] == ["f0.txt"]
    enum.add_splits_back(got, 0)
    enum.handle_split_request(0, None)
    assert [Path(s.path).name for s in ctx.take_assignments(0)] == ["f0.txt"]
    with pytest.raises(InvalidProgramError, match="belongs to another source"):
        source.restore_enumerator(ctx, [("x", 1)])
    with pytest.raises(InvalidProgramError, match="not a file split"):
        source.create_reader(TestingReaderContext()).add_splits([("x", 1)])  # type: ignore[list-item]  # a foreign split, on purpose
    assert FileSplit("p", 3).split_id == "p"
