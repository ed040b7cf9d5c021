"""Snapshots record each state's type and the key type; a restore checks them (Flink: state meta
info + serializer compatibility): restored as is, migrated, or refused naming state, operator and
both types. Driven through a keyed operator and real state files, on both backends."""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from runtime.api.common.typeinfo import Types
from runtime.api.datastream.functions import KeyedProcessFunction
from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
from runtime.api.operators.keyed_process import KeyedProcessOperator
from runtime.api.operators.runtime_context import with_declared_key_type
from runtime.core.checkpoint import OperatorSnapshot, canonical_snapshot
from runtime.core.errors import CorruptStateError, IncompatibleStateError, ThrowableType, throwable_type_of
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group
from runtime.core.row import Row
from runtime.state.backend import StateError
from runtime.storage.state_files import KIND_STATE_META, read_operator_state, write_state_file
from tests.harness import CollectingOutput, make_context, obj

pytestmark = pytest.mark.unit

FULL = KeyGroupRange(0, 127)
BACKENDS = ["hashmap", "rocksdb"]


class Remember(KeyedProcessFunction):
    """Keeps each record's value under its key in `descriptor`'s state; emits (key, what was there)."""

    def __init__(self, descriptor: Any, write: bool = True) -> None:
        self.descriptor = descriptor
        self.write = write

    def open(self, ctx: Any) -> None:
        self.state = ctx.get_state(self.descriptor) if self.descriptor.kind == "value" else (
            ctx.get_list_state(self.descriptor) if self.descriptor.kind == "list" else ctx.get_map_state(self.descriptor))

    def process_element(self, value: Any, ctx: Any):
        key, v = value
        if self.descriptor.kind == "value":
            before = self.state.value()
            if self.write:
                self.state.update(v)
        elif self.descriptor.kind == "list":
            before = list(self.state.get())
            if self.write:
                self.state.add(v)
        else:
            before = dict(self.state.items())
            if self.write:
                self.state.put("k", v)
        yield key, before


def _operator(descriptor: Any, key_type: Any = None, write: bool = True) -> KeyedProcessOperator:
    def make() -> KeyedProcessOperator:
        return KeyedProcessOperator(lambda r: r[0], Remember(descriptor, write))

    return with_declared_key_type(make, key_type) if key_type is not None else make()


def _setup(op: KeyedProcessOperator, backend: str, job_id: str = "job-that-saved") -> CollectingOutput:
    out = CollectingOutput()
    op.setup(make_context(out, name="remember", config={"state.backend.type": backend}, job_id=job_id))
    return out


def savepoint_of(tmp: Path, backend: str, descriptor: Any, records: list[tuple[Any, Any]], key_type: Any = None, savepoint: bool = True) -> list[str]:
    """Run an operator over `records`, snapshot it (a savepoint: canonical rows; else a checkpoint,
    native for RocksDB) and write the snapshot as a state file."""
    op = _operator(descriptor, key_type)
    _setup(op, backend)
    op.open()
    op.process_batch(obj(records))
    with canonical_snapshot() if savepoint else contextlib.nullcontext():
        snap = op.snapshot_state(1)
    handle = write_state_file(str(tmp), 1, 0, 0, 1, {"op": snap})
    op.close()
    assert handle is not None
    return [handle.path]


def restored(tmp: Path, files: list[str], backend: str, descriptor: Any, key_type: Any = None, write: bool = True,
             job_id: str = "job-that-restores") -> tuple[KeyedProcessOperator, CollectingOutput]:
    """A new operator restored from `files` and opened (the state's type is checked at open);
    by default in another job (run -s), with job_id="job-that-saved" a failover of the same job."""
    op = _operator(descriptor, key_type, write)
    out = _setup(op, backend, job_id)
    ctx = read_operator_state(str(tmp), files, "op", FULL, 0, 1)
    ctx.restored_checkpoint_id = 1
    op.initialize_state(ctx)
    op.open()
    return op, out


# --- what is recorded -----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshots_record_state_types_and_key_types(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10), (2, 20), (3, 30)])
    ctx = read_operator_state(str(tmp_path), files, "op", FULL, 0, 1)
    assert ctx.state_meta["states"]["count"] == {"kind": "value", "type": "LONG"}
    assert ctx.state_meta["key"] == {"declared": None, "observed": ["int"]}
    typed = savepoint_of(tmp_path / "typed", backend, ValueStateDescriptor("v"), [("a", 1)], key_type=Types.STRING())
    meta = read_operator_state(str(tmp_path / "typed"), typed, "op", FULL, 0, 1).state_meta
    assert meta["key"] == {"declared": "STRING", "observed": ["str"]} and meta["states"]["v"]["type"] is None
    # the record is not state: readers that count rows do not see it
    info = list_operators_of(tmp_path, files)
    assert info == {"count": ("value", 3)}
    # a checkpoint (RocksDB: native files, keys never iterated) records the key types too
    native = savepoint_of(tmp_path / "cp", backend, ValueStateDescriptor("count", Types.LONG()), [((1, "a"), 1)], savepoint=False)
    assert read_operator_state(str(tmp_path / "cp"), native, "op", FULL, 0, 1).state_meta["key"]["observed"] == ["tuple[int, str]"]


def list_operators_of(tmp_path: Path, files: list[str]) -> dict[str, Any]:
    """list_operators needs a committed table; count the rows the way it does, from the file."""
    import pyarrow.parquet as pq

    t = pq.read_table(os.path.join(tmp_path, files[0])).to_pylist()
    assert sum(r["kind"] == KIND_STATE_META for r in t) == 1
    assert json.loads(next(r["value_string"] for r in t if r["kind"] == KIND_STATE_META))["states"]["count"]["type"] == "LONG"
    out: dict[str, Any] = {}
    for r in t:
        if r["kind"] == "keyed":
            kind, n = out.get(r["state_name"], (r["state_kind"], 0))
            out[r["state_name"]] = (kind, n + 1)
    return out


# --- changed state types ----------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_long_state_restored_as_string_or_row_fails_naming_state_operator_and_types(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10)])
    for new, shown in ((Types.STRING(), "STRING"), (Types.ROW_NAMED(["n"], [Types.LONG()]), "ROW_NAMED(n: LONG)")):
        with pytest.raises(IncompatibleStateError) as e:
            restored(tmp_path, files, backend, ValueStateDescriptor("count", new))
        msg = str(e.value)
        assert "'count'" in msg and "'remember'" in msg and "LONG" in msg and shown in msg
        assert throwable_type_of(e.value) is ThrowableType.NON_RECOVERABLE_ERROR


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_widened_number_is_migrated(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10), (2, 20)])
    op, out = restored(tmp_path, files, backend, ValueStateDescriptor("count", Types.DOUBLE()))
    op.process_batch(obj([(1, 0.5), (2, 0.5), (3, 0.5)]))
    op.flush_output()
    got = dict(out.values())
    assert got == {1: 10.0, 2: 20.0, 3: None} and type(got[1]) is float


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_row_that_gained_a_nullable_field_at_the_end_is_migrated(tmp_path: Path, backend: str) -> None:
    old = ValueStateDescriptor("last", Types.ROW_NAMED(["id", "name"], [Types.INT(), Types.STRING()]))
    files = savepoint_of(tmp_path, backend, old, [(1, Row(id=1, name="a"))])
    new = ValueStateDescriptor("last", Types.ROW_NAMED(["id", "name", "score"], [Types.LONG(), Types.STRING(), Types.DOUBLE()]))
    op, out = restored(tmp_path, files, backend, new)
    op.process_batch(obj([(1, None)]))
    op.flush_output()
    (key, row), = out.values()
    assert row == Row(id=1, name="a", score=None) and row.score is None


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_and_map_states_migrate_element_and_value_wise(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ListStateDescriptor("seen", Types.INT()), [(1, 1), (1, 2)])
    op, out = restored(tmp_path / ".", files, backend, ListStateDescriptor("seen", Types.DOUBLE()), write=False)
    op.process_batch(obj([(1, None)]))
    op.flush_output()
    assert out.values() == [(1, [1.0, 2.0])] and all(type(v) is float for v in out.values()[0][1])
    mfiles = savepoint_of(tmp_path / "m", backend, MapStateDescriptor("m", Types.STRING(), Types.INT()), [(1, 5)])
    op, out = restored(tmp_path / "m", mfiles, backend, MapStateDescriptor("m", Types.STRING(), Types.LONG()), write=False)
    op.process_batch(obj([(1, None)]))
    op.flush_output()
    assert out.values() == [(1, {"k": 5})]


@pytest.mark.parametrize("backend", BACKENDS)
def test_migrated_values_with_a_time_to_live_keep_their_timestamps(tmp_path: Path, backend: str) -> None:
    def with_ttl(d: Any) -> Any:
        d.enable_time_to_live(StateTtlConfig.new_builder(3_600_000).build())
        return d

    files = savepoint_of(tmp_path, backend, with_ttl(ValueStateDescriptor("count", Types.INT())), [(1, 7)])
    op, out = restored(tmp_path, files, backend, with_ttl(ValueStateDescriptor("count", Types.DOUBLE())), write=False)
    op.process_batch(obj([(1, None)]))
    op.flush_output()
    assert out.values() == [(1, 7.0)] and type(out.values()[0][1]) is float


@pytest.mark.parametrize("backend", BACKENDS)
def test_unknown_types_on_either_side_restore_as_they_are(tmp_path: Path, backend: str) -> None:
    untyped = savepoint_of(tmp_path / "a", backend, ValueStateDescriptor("count"), [(1, 10)])
    op, out = restored(tmp_path / "a", untyped, backend, ValueStateDescriptor("count", Types.STRING()), write=False)
    op.process_batch(obj([(1, None)]))
    op.flush_output()
    assert out.values() == [(1, 10)]  # nothing was recorded: the old value, as before types were recorded
    typed = savepoint_of(tmp_path / "b", backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10)])
    for new in (None, Types.PICKLED_BYTE_ARRAY()):
        op, out = restored(tmp_path / "b", typed, backend, ValueStateDescriptor("count", new), write=False)
        op.process_batch(obj([(1, None)]))
        op.flush_output()
        assert out.values() == [(1, 10)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_state_written_without_a_type_record_restores(tmp_path: Path, backend: str) -> None:
    """State files of the format before types were recorded (no 'state_meta' row) restore as they
    did: typed descriptors get the values as they are."""
    legacy = OperatorSnapshot(keyed={assign_to_key_group(key, 128): {"count": ("value", [(key, None, 10 * key)])} for key in (1, 2)})
    handle = write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": legacy})
    ctx = read_operator_state(str(tmp_path), [handle.path], "op", FULL, 0, 1)
    assert ctx.state_meta is None
    op, out = restored(tmp_path, [handle.path], backend, ValueStateDescriptor("count", Types.STRING()), key_type=Types.STRING(), write=False)
    op.process_batch(obj([(1, None), (2, None)]))
    op.flush_output()
    assert sorted(out.values()) == [(1, 10), (2, 20)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_state_of_another_kind_is_still_refused_as_before(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10)])
    with pytest.raises(StateError, match="'count' is a value state but was requested as a list state"):
        restored(tmp_path, files, backend, ListStateDescriptor("count", Types.LONG()))


# --- changed key types -------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_int_keys_restored_by_a_program_keying_by_str_fail_on_the_first_keys(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10), (2, 20)])
    op, _ = restored(tmp_path, files, backend, ValueStateDescriptor("count", Types.LONG()))
    with pytest.raises(IncompatibleStateError) as e:
        op.process_batch(obj([("1", 1), ("2", 2)]))
    msg = str(e.value)
    assert "'remember'" in msg and "Python int" in msg and "Python str" in msg
    # the same keys pass, and so does a program that only later sees other keys (checked once)
    op, out = restored(tmp_path, files, backend, ValueStateDescriptor("count", Types.LONG()))
    op.process_batch(obj([(1, 11)]))
    op.process_batch(obj([("x", 1)]))
    op.flush_output()
    assert out.values() == [(1, 10), ("x", None)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_failover_of_the_same_job_is_not_checked_by_the_keys_it_happens_to_see_first(tmp_path: Path, backend: str) -> None:
    """The keys seen are data, not the program: after a failover (the same job, the same program)
    a first batch of keys of a type the state never had must not fail the job for good."""
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10)])
    op, out = restored(tmp_path, files, backend, ValueStateDescriptor("count", Types.LONG()), job_id="job-that-saved")
    op.process_batch(obj([("new", 1)]))
    op.flush_output()
    assert out.values() == [("new", None)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_declared_key_type_is_checked_at_restore(tmp_path: Path, backend: str) -> None:
    files = savepoint_of(tmp_path, backend, ValueStateDescriptor("count", Types.LONG()), [(1, 10)], key_type=Types.LONG())
    with pytest.raises(IncompatibleStateError) as e:
        restored(tmp_path, files, backend, ValueStateDescriptor("count", Types.LONG()), key_type=Types.STRING())
    assert "declared LONG" in str(e.value) and "declared STRING" in str(e.value) and "'remember'" in str(e.value)
    restored(tmp_path, files, backend, ValueStateDescriptor("count", Types.LONG()), key_type=Types.INT())  # both ints: fine


# --- damaged files ------------------------------------------------------------------------------------
def test_a_truncated_state_file_is_a_non_recoverable_error_naming_the_file(tmp_path: Path) -> None:
    files = savepoint_of(tmp_path, "hashmap", ValueStateDescriptor("count", Types.LONG()), [(i, i) for i in range(1000)])
    path = tmp_path / files[0]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CorruptStateError) as e:
        read_operator_state(str(tmp_path), files, "op", FULL, 0, 1)
    assert str(path) in str(e.value) and "damaged" in str(e.value)
    assert throwable_type_of(e.value) is ThrowableType.NON_RECOVERABLE_ERROR
    path.unlink()
    with pytest.raises(CorruptStateError, match="is missing"):
        read_operator_state(str(tmp_path), files, "op", FULL, 0, 1)
