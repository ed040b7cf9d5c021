"""tests/e2e/leftovers.assert_untouched_or_complete, the check the interrupt tests rest on: it must
reject a duplicated row, a missing row, and no table after a run that exited 0."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.e2e.leftovers import assert_untouched_or_complete

REFERENCE = {(1, 0): (2, 10), (2, 1000): (1, 5), (3, 1000): (4, 40)}


def _write(path: Path, rows: list[tuple[int, int, int, int]]) -> None:
    columns = list(zip(*rows))
    write_deltalake(str(path), pa.table({name: pa.array(col, pa.int64()) for name, col in zip(("user_id", "window_start", "count", "sum"), columns)}))


def _rows(reference: dict) -> list[tuple[int, int, int, int]]:
    return [(user, window, count, total) for (user, window), (count, total) in reference.items()]


def test_a_complete_table_passes_and_so_does_none_after_an_interrupted_run(tmp_path: Path) -> None:
    _write(tmp_path / "out", _rows(REFERENCE))
    assert_untouched_or_complete(tmp_path / "out", REFERENCE, finished=True)
    assert_untouched_or_complete(tmp_path / "never-written", REFERENCE)


def test_a_duplicated_row_fails(tmp_path: Path) -> None:
    rows = _rows(REFERENCE)
    _write(tmp_path / "out", rows + rows[:1])
    with pytest.raises(AssertionError, match=r"4 rows for 3 .*\(1 duplicated\)"):
        assert_untouched_or_complete(tmp_path / "out", REFERENCE)


def test_a_missing_row_fails(tmp_path: Path) -> None:
    _write(tmp_path / "out", _rows(REFERENCE)[:-1])
    with pytest.raises(AssertionError, match="2 rows for 3"):
        assert_untouched_or_complete(tmp_path / "out", REFERENCE)


def test_no_table_after_a_run_that_exited_0_fails(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="the run finished, yet it left no table"):
        assert_untouched_or_complete(tmp_path / "out", REFERENCE, finished=True)
