"""A snapshot writer that cannot be forked fails that checkpoint (docs/fault_tolerance.md): it does not
fall back to writing on a thread, which would read state the task keeps changing (nothing was pinned)."""
from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.errors import MillraceError
from runtime.taskmanager.task import Task


def test_a_failed_fork_fails_the_snapshot_and_writes_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    task = SimpleNamespace(
        tdd=SimpleNamespace(subtask_index=0, attempt_number=0, parallelism=1),
        _snapshot_writers=set(),
        _snapshot_writer_deadline_s=lambda: 5,
    )
    live = {0: {"count": ("value", [(1, None, 41)])}}
    snapshots = {"op": OperatorSnapshot(keyed=live)}
    with pytest.raises(MillraceError, match="could not fork the snapshot writer"):
        Task._fork_snapshot_writer(task, 7, snapshots, str(tmp_path))  # type: ignore[arg-type]  # a double with the attributes the method reads
    assert not task._snapshot_writers and not list(tmp_path.iterdir())  # no writer, no file, no folder
    assert snapshots["op"].keyed is live  # the state was not handed to anyone else to write
