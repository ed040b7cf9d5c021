"""The checkpoint contract of the keyed state backends: a cheap synchronous pin, entries later, any-backend restore."""
from __future__ import annotations

import copy
import os

import pytest

from runtime.api.datastream.functions import AggregateFunction
from runtime.api.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    ValueStateDescriptor,
)
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group, compute_key_group_range_for_operator_index
from runtime.state import create_keyed_state_backend
from runtime.state.rocksdb import RocksDBKeyedStateBackend

pytestmark = pytest.mark.unit

BACKENDS = ["hashmap", "rocksdb"]


class MutatingAverage(AggregateFunction):
    """Changes its accumulator in place and returns it (legal in Flink): snapshots must still be stable."""

    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        acc[0] += value
        acc[1] += 1
        return acc

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


def fill(b, keys, offset=0):
    for k in keys:
        b.set_current_key(k)
        b.get_partitioned_state(ValueStateDescriptor("v")).update(k + offset)
        b.get_partitioned_state(ListStateDescriptor("l")).add(k + offset)
        b.get_partitioned_state(MapStateDescriptor("m")).put("x", k + offset)
        b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c)).add(k + offset)
        b.get_partitioned_state(AggregatingStateDescriptor("a", MutatingAverage())).add(k + offset)


def read(b, keys):
    out = {}
    for k in keys:
        b.set_current_key(k)
        out[k] = (
            b.get_partitioned_state(ValueStateDescriptor("v")).value(),
            b.get_partitioned_state(ListStateDescriptor("l")).get(),
            dict(b.get_partitioned_state(MapStateDescriptor("m")).items()),
            b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c)).get(),
            b.get_partitioned_state(AggregatingStateDescriptor("a", MutatingAverage())).get(),
        )
    return out


@pytest.mark.parametrize("src_kind", BACKENDS)
@pytest.mark.parametrize("dst_kind", BACKENDS)
def test_a_pinned_snapshot_ignores_later_updates_and_restores_into_either_backend(src_kind, dst_kind):
    keys = list(range(200))
    src = create_keyed_state_backend(src_kind, KeyGroupRange(0, 127), 128, "src")
    fill(src, keys)
    expected = copy.deepcopy(read(src, keys))  # the heap backend hands out live objects
    supplier = src.snapshot_sync()
    fill(src, keys, offset=1000)  # after the synchronous part: must not show in the snapshot
    snapshot = supplier()
    dst = create_keyed_state_backend(dst_kind, KeyGroupRange(0, 127), 128, "dst")
    dst.restore_keyed(snapshot)
    assert read(dst, keys) == expected
    src.dispose()
    dst.dispose()


@pytest.mark.parametrize("kind", BACKENDS)
def test_rescaling_two_to_three_puts_every_key_in_exactly_one_subtask(kind):
    keys = list(range(500))
    olds = [create_keyed_state_backend(kind, compute_key_group_range_for_operator_index(128, 2, i), 128, f"old{i}") for i in range(2)]
    for b in olds:
        mine = [k for k in keys if assign_to_key_group(k, 128) in b.key_group_range]
        fill(b, mine)
    snapshots = [b.snapshot_sync()() for b in olds]
    seen = {}
    for i in range(3):
        new = create_keyed_state_backend(kind, compute_key_group_range_for_operator_index(128, 3, i), 128, f"new{i}")
        for snap in snapshots:
            new.restore_keyed(snap)
        for k in new.get_keys("v"):
            assert k not in seen
            seen[k] = read(new, [k])[k]
        new.dispose()
    assert sorted(seen) == keys
    assert seen[7][0] == 7 and seen[7][1] == [7]


def test_timers_round_trip_as_keyed_entries():
    from runtime.state.timers import InternalTimerService

    class T:
        def __init__(self):
            self.fired = []

        def on_event_time(self, timer):
            self.fired.append((timer.key, timer.timestamp))

        def on_processing_time(self, timer):
            pass

    class PTS:
        def current_processing_time(self):
            return 0

        def register_timer(self, ts, cb):
            return None

    b = create_keyed_state_backend("hashmap", KeyGroupRange(0, 127), 128, "t")
    svc = InternalTimerService("w", b, PTS(), T())
    for k in range(20):
        b.set_current_key(k)
        svc.register_event_time_timer(None, 100 + k)
    entries = svc.snapshot_sync()()
    b2 = create_keyed_state_backend("hashmap", KeyGroupRange(0, 127), 128, "t2")
    t2 = T()
    svc2 = InternalTimerService("w", b2, PTS(), t2)
    svc2.restore_keyed(entries)
    svc2.advance_watermark(1000)
    assert sorted(t2.fired) == [(k, 100 + k) for k in range(20)]


@pytest.mark.parametrize("kind", BACKENDS)
def test_value_objects_changed_in_place_after_the_snapshot_do_not_reach_it(kind):
    """The Python habit `v = state.value(); v.append(x); state.update(v)`: the heap backend copies such values."""
    b = create_keyed_state_backend(kind, KeyGroupRange(0, 127), 128, "mut")
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for k in range(50):
        b.set_current_key(k)
        v.update([k])
    supplier = b.snapshot_sync()
    for k in range(50):
        b.set_current_key(k)
        cur = v.value()
        cur.append(-1)
        v.update(cur)
    snap = supplier()
    assert sorted(e[2] for states in snap.values() for e in states["v"][1]) == [[k] for k in range(50)]
    b.dispose()


@pytest.mark.parametrize("kind", BACKENDS)
def test_restored_state_does_not_share_values_with_the_snapshot(kind):
    src = create_keyed_state_backend("hashmap", KeyGroupRange(0, 127), 128, "src")
    fill(src, range(30))
    snapshot = src.snapshot_sync()()
    expected = copy.deepcopy(snapshot)
    a = create_keyed_state_backend(kind, KeyGroupRange(0, 127), 128, "a")
    a.restore_keyed(snapshot)
    fill(a, range(30), offset=5)  # list_add / map_put in place on the restored values
    assert snapshot == expected
    b = create_keyed_state_backend(kind, KeyGroupRange(0, 127), 128, "b")
    b.restore_keyed(snapshot)
    assert read(b, range(30)) == read(src, range(30))
    for x in (src, a, b):
        x.dispose()


@pytest.mark.parametrize("kind", BACKENDS)
def test_restore_ignores_foreign_key_groups_and_operator_internal_kinds(kind):
    b = create_keyed_state_backend(kind, KeyGroupRange(0, 63), 128, "r")
    key = next(k for k in range(100) if assign_to_key_group(k, 128) <= 63)
    foreign = next(k for k in range(100) if assign_to_key_group(k, 128) > 63)
    b.restore_keyed(
        {
            assign_to_key_group(key, 128): {
                "v": ("value", [(key, None, 1)]),
                "__timers__/t/event": ("timer", [(key, None, 5)]),
                "__window_panes__": ("pane", [(key, 0, ((1,), False))]),
            },
            assign_to_key_group(foreign, 128): {"v": ("value", [(foreign, None, 2)])},
        }
    )
    assert b.registered_state_names() == ["v"]
    assert list(b.get_keys("v")) == [key]
    b.dispose()


@pytest.mark.parametrize("kind", BACKENDS)
def test_snapshots_of_an_empty_backend_and_overlapping_snapshots(kind):
    b = create_keyed_state_backend(kind, KeyGroupRange(0, 127), 128, "e")
    assert b.snapshot_sync()() == {}
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    b.set_current_key("k")
    v.update(1)
    first = b.snapshot_sync()
    v.update(2)
    second = b.snapshot_sync()  # two checkpoints in flight: each sees its own state
    v.update(3)
    assert [e[2] for states in second().values() for e in states["v"][1]] == [2]
    assert [e[2] for states in first().values() for e in states["v"][1]] == [1]
    if kind == "rocksdb":  # the suppliers removed their native checkpoints
        assert isinstance(b, RocksDBKeyedStateBackend)
        assert [p for p in os.listdir(b.path) if p.startswith("snapshot-")] == []
    b.dispose()


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_forked_snapshot_writer_reads_the_state_and_exits_while_the_parent_writes_on(kind, tmp_path):
    """The fork path of the tasks: the child must never wait for threads that did not survive the fork."""
    import os
    import threading

    from runtime.core.checkpoint import OperatorSnapshot, copy_on_write_snapshot, mark_forked_snapshot_writer
    from runtime.storage.state_files import read_operator_state, write_state_file

    b = create_keyed_state_backend(kind, KeyGroupRange(0, 127), 128, "forked")
    keys = list(range(2000))
    fill(b, keys)
    expected = copy.deepcopy(read(b, keys))
    with copy_on_write_snapshot():
        supplier = b.snapshot_sync()
    stop = threading.Event()

    def busy() -> None:  # the parent keeps writing while the child reads (RocksDB flushes and compacts meanwhile)
        while not stop.is_set():
            fill(b, keys[:50], offset=10_000)

    t = threading.Thread(target=busy)
    try:
        pid = os.fork()  # right after the synchronous part, as the task does; then the parent goes on writing
        if pid != 0:
            t.start()
        if pid == 0:
            code = 1
            try:
                mark_forked_snapshot_writer()
                handle = write_state_file(str(tmp_path), 1, 0, 0, 1, {"op": OperatorSnapshot(keyed=supplier)})
                code = 0 if handle is not None else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        stop.set()
        if t.is_alive():
            t.join()
    assert os.waitstatus_to_exitcode(status) == 0
    files = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.parquet")]
    restored = create_keyed_state_backend("hashmap", KeyGroupRange(0, 127), 128, "restored")
    restored.restore_keyed(read_operator_state(str(tmp_path), files, "op", KeyGroupRange(0, 127), 0, 1).keyed)
    assert read(restored, keys) == expected
    b.dispose()
