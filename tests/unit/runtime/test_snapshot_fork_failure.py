"""Where a snapshot is written (docs/fault_tolerance.md): a snapshot writer that cannot be forked fails
that checkpoint (it does not fall back to writing on a thread, which would read state the task keeps
changing: nothing was pinned); auto mode forks only after a large state file."""
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


def test_auto_mode_writes_on_a_thread_after_a_small_state_file_and_forks_after_a_large_one(tmp_path) -> None:
    """state.snapshot.async-mode auto (the default): a fork costs the task tens of ms in a large
    process however small the state, so a task whose last state file was small writes on a thread."""
    from runtime.core.options.task import TaskSettings

    acks: list = []
    task = SimpleNamespace(
        tdd=SimpleNamespace(
            job_id="job", execution_attempt_id="a-0", subtask_index=0, attempt_number=0, parallelism=1,
            checkpoint_dir=str(tmp_path), task_name_with_subtask="op (1/1)",
        ),
        settings=TaskSettings.from_config({"state.snapshot.fork-threshold": "4 kb"}),
        _last_state_bytes=None, _canceled=SimpleNamespace(is_set=lambda: False), checkpoint_response=acks.append,
        _remember_state_file=lambda *a: None,
    )
    fork_next = Task._fork_next_snapshot.fget  # type: ignore[attr-defined]  # the property's function, called on the double
    assert fork_next(task)  # nothing written yet
    for cid, n in ((1, 3), (2, 20_000)):
        keyed = {0: {"count": ("value", [(k, None, k * 7) for k in range(n)])}}
        Task._write_and_acknowledge(task, cid, {"op": OperatorSnapshot(keyed=keyed)}, str(tmp_path), 0, 0)  # type: ignore[arg-type]  # a double with the attributes the method reads
        assert acks[-1].checkpoint_id == cid and acks[-1].state.files[0].size == task._last_state_bytes
        assert fork_next(task) is (cid == 2)  # a few bytes: a thread next; 20,000 entries: fork again
