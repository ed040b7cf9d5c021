"""State reader (pyarrow): typed columns where the file used one, repr strings otherwise, checkpoint selection."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from runtime.core.checkpoint import OperatorSnapshot
from runtime.core.errors import StorageError
from runtime.storage.checkpoint_store import CheckpointMetadata, CheckpointStore
from runtime.storage.state_files import write_state_file
from runtime.storage.state_reader import list_operators, read_keyed_state, resolve_checkpoint

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class Window:
    start: int
    end: int


def commit(root: str, cid: int, keyed: dict[str, Any], lists: dict[str, list[Any]] | None = None) -> None:
    files = [write_state_file(root, cid, 0, 0, 1, {"op": OperatorSnapshot(keyed=keyed, operator_lists=lists or {})})]
    CheckpointStore(root, "job", num_retained=5).commit(CheckpointMetadata(
        job_id="job", checkpoint_id=cid, timestamp_ms=cid, files=files, operator_files={"op": [f.path for f in files]},
        committables={}, parallelism={"op": 1}, max_parallelism={"op": 128},
    ))


def test_typed_mixed_and_window_columns(tmp_path: Any) -> None:
    root = str(tmp_path)
    commit(root, 1, {
        3: {"count": ("value", [(1, None, 10), (2, None, 20)])},
        4: {"mixed": ("value", [(7, Window(0, 1000), "x"), (8, Window(1000, 2000), 5)])},
    }, {"offsets": [1, 2]})
    t = read_keyed_state(root, "op", "count")
    assert t.column("key").type == "int64" and t.column("value").to_pylist() == [10, 20]
    assert t.column("namespace").null_count == 2
    # a file whose values are all tuples: the tuple column, typed item by item
    commit(str(tmp_path / "t"), 1, {0: {"acc": ("value", [(1, None, (1, 2.5)), (2, None, (3, 4.5))])}})
    acc = read_keyed_state(str(tmp_path / "t"), "op", "acc").column("value").to_pylist()[0]
    assert [(i["long"], i["double"]) for i in acc] == [(1, None), (None, 2.5)]
    mixed = read_keyed_state(root, "op", "mixed")
    assert mixed.column("value").to_pylist() == ["'x'", "5"]  # mixed kinds: repr strings
    assert mixed.column("window_start").to_pylist() == [0, 1000] and mixed.column("window_end").to_pylist() == [1000, 2000]
    assert read_keyed_state(root, "op").num_rows == 4  # every keyed state; list state is not keyed
    (info,) = list_operators(root)
    assert info.states == {"count": ("value", 2), "mixed": ("value", 2), "offsets": ("list", 2)}
    assert (info.parallelism, info.max_parallelism, info.rows) == (1, 128, 6)


def test_checkpoint_selection_and_errors(tmp_path: Any) -> None:
    root = str(tmp_path)
    commit(root, 1, {0: {"s": ("value", [(1, None, 1)])}})
    commit(root, 2, {0: {"s": ("value", [(1, None, 2)])}})
    assert read_keyed_state(root, "op").column("value").to_pylist() == [2]
    assert read_keyed_state(root, "op", checkpoint_id=1).column("value").to_pylist() == [1]
    assert resolve_checkpoint(root).checkpoint_id == 2
    with pytest.raises(StorageError, match="has no checkpoint 7; it has 1, 2"):
        read_keyed_state(root, "op", checkpoint_id=7)
    with pytest.raises(StorageError, match="operators with state: op"):
        read_keyed_state(root, "other")
    with pytest.raises(StorageError, match="its states: s"):
        read_keyed_state(root, "op", "t")
    with pytest.raises(StorageError, match="holds no checkpoint or savepoint"):
        read_keyed_state(str(tmp_path / "nothing"), "op")
