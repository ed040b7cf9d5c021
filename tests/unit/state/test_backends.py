from __future__ import annotations

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
from runtime.api.datastream.window import TimeWindow
from runtime.core.errors import ConfigurationError
from runtime.core.keygroups import KeyGroupRange, assign_to_key_group
from runtime.core.row import Row
from runtime.state import StateError, create_keyed_state_backend
from runtime.state.rocksdb import RocksDBKeyedStateBackend

pytestmark = pytest.mark.unit

KINDS = ["hashmap", "rocksdb"]
FULL = KeyGroupRange(0, 127)


class AvgAgg(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


@pytest.fixture(params=KINDS)
def backend(request):
    b = create_keyed_state_backend(request.param, FULL, 128, f"test-{request.param}")
    yield b
    b.dispose()


def test_value_state_per_key_and_namespace(backend):
    d = ValueStateDescriptor("v")
    s = backend.get_partitioned_state(d)
    w1 = backend.get_partitioned_state(d, TimeWindow(0, 10))
    for k in ["a", "b", 7, ("t", 1), Row(x=1)]:
        backend.set_current_key(k)
        assert s.value() is None
        s.update(f"val-{k}")
        w1.update(k)
    for k in ["a", "b", 7, ("t", 1), Row(x=1)]:
        backend.set_current_key(k)
        assert s.value() == f"val-{k}"
        assert w1.value() == k
    backend.set_current_key("a")
    s.clear()
    assert s.value() is None and w1.value() == "a"
    s.update(None)  # Flink: update(null) clears
    assert s.value() is None
    assert sorted(map(str, backend.get_keys("v", TimeWindow(0, 10)))) == sorted(
        map(str, ["a", "b", 7, ("t", 1), Row(x=1)])
    )


def test_list_state(backend):
    s = backend.get_partitioned_state(ListStateDescriptor("l"))
    backend.set_current_key("k")
    assert list(s.get()) == []
    s.add(1)
    s.add(2)
    s.add_all([3, 4])
    assert list(s.get()) == [1, 2, 3, 4]
    backend.set_current_key("other")
    assert list(s.get()) == []
    s.update([9, 8])
    assert list(s) == [9, 8]
    backend.set_current_key("k")
    s.update([5])
    assert list(s.get()) == [5]
    s.clear()
    assert list(s.get()) == []


def test_map_state(backend):
    m = backend.get_partitioned_state(MapStateDescriptor("m"))
    backend.set_current_key(1)
    assert m.is_empty() and m.get("x") is None and not m.contains("x")
    m.put("x", 1)
    m.put_all({"y": 2, ("z", 3): [1, 2]})
    assert m.get("x") == 1 and m.contains(("z", 3)) and m.get(("z", 3)) == [1, 2]
    assert dict(m.items()) == {"x": 1, "y": 2, ("z", 3): [1, 2]}
    assert sorted(map(str, m.keys())) == sorted(map(str, ["x", "y", ("z", 3)]))
    m.remove("x")
    assert not m.contains("x") and len(list(m.values())) == 2
    backend.set_current_key(2)
    assert m.is_empty()
    backend.set_current_key(1)
    m.clear()
    assert m.is_empty()


def test_reducing_and_aggregating_state(backend):
    r = backend.get_partitioned_state(ReducingStateDescriptor("r", lambda a, b: a + b))
    a = backend.get_partitioned_state(AggregatingStateDescriptor("a", AvgAgg()))
    backend.set_current_key("k")
    assert r.get() is None and a.get() is None
    for v in [1, 2, 3, 6]:
        r.add(v)
        a.add(v)
    assert r.get() == 12 and a.get() == 3.0
    r.clear()
    a.clear()
    assert r.get() is None and a.get() is None


def test_merge_namespaces(backend):
    backend.set_current_key("k")
    w = [TimeWindow(i, i + 5) for i in range(4)]
    lst = backend.get_partitioned_state(ListStateDescriptor("l"), w[0])
    red = backend.get_partitioned_state(ReducingStateDescriptor("r", lambda a, b: a + b), w[0])
    agg = backend.get_partitioned_state(AggregatingStateDescriptor("a", AvgAgg()), w[0])
    for i, win in enumerate(w):
        for s in (lst, red, agg):
            s.set_current_namespace(win)
            s.add(i + 1)
    for s in (lst, red, agg):
        s.merge_namespaces(w[0], [w[1], w[2]])
        s.set_current_namespace(w[0])
    assert sorted(lst.get()) == [1, 2, 3] and red.get() == 6 and agg.get() == 2.0
    for s in (lst, red, agg):
        s.set_current_namespace(w[1])
        assert not s.get()
        s.set_current_namespace(w[3])
    assert list(lst.get()) == [4] and red.get() == 4


def test_errors(backend):
    v = backend.get_partitioned_state(ValueStateDescriptor("v"))
    with pytest.raises(StateError, match="no current key"):
        v.value()
    with pytest.raises(StateError, match="value state but was requested as a list"):
        backend.get_partitioned_state(ListStateDescriptor("v"))
    narrow = create_keyed_state_backend(backend.kind, KeyGroupRange(0, 0), 128, "narrow")
    try:
        key = next(k for k in range(1000) if assign_to_key_group(k, 128) != 0)
        with pytest.raises(StateError, match="outside this subtask's key groups"):
            narrow.set_current_key(key)
    finally:
        narrow.dispose()


def _fill(b, keys):
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"), TimeWindow(0, 10))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c))
    for k in keys:
        b.set_current_key(k)
        v.update(("v", k))
        lst.add_all([k, k])
        m.put_all({"a": k, "b": [k]})
        r.add(1)
        r.add(2)


def _dump(b, keys):
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    lst = b.get_partitioned_state(ListStateDescriptor("l"), TimeWindow(0, 10))
    m = b.get_partitioned_state(MapStateDescriptor("m"))
    r = b.get_partitioned_state(ReducingStateDescriptor("r", lambda a, c: a + c))
    out = {}
    for k in keys:
        b.set_current_key(k)
        out[k] = (v.value(), list(lst.get()), dict(m.items()), r.get())
    return out


@pytest.mark.parametrize("src_kind", KINDS)
@pytest.mark.parametrize("dst_kind", KINDS)
def test_snapshot_restore_round_trip_and_rescale(src_kind, dst_kind):
    keys = [f"key-{i}" for i in range(60)] + list(range(40))
    src = create_keyed_state_backend(src_kind, FULL, 128, "src")
    _fill(src, keys)
    expected = _dump(src, keys)
    snap = src.snapshot_sync()()
    assert set(snap) == {assign_to_key_group(k, 128) for k in keys}
    kinds = {name: kind for states in snap.values() for name, (kind, _) in states.items()}
    assert kinds == {"v": "value", "l": "list", "m": "map", "r": "reducing"}
    # canonical values: list state as a list, map state as a dict, whichever backend wrote them
    kg = assign_to_key_group("key-0", 128)
    assert ("key-0", TimeWindow(0, 10), ["key-0", "key-0"]) in snap[kg]["l"][1]
    assert ("key-0", None, {"a": "key-0", "b": ["key-0"]}) in snap[kg]["m"][1]

    same = create_keyed_state_backend(dst_kind, FULL, 128, "same")
    same.restore_keyed(snap)
    assert _dump(same, keys) == expected

    # rescale to 2 subtasks: each takes only its key groups
    lo = create_keyed_state_backend(dst_kind, KeyGroupRange(0, 63), 128, "lo")
    hi = create_keyed_state_backend(dst_kind, KeyGroupRange(64, 127), 128, "hi")
    lo.restore_keyed(snap)
    hi.restore_keyed(snap)
    lo_keys = [k for k in keys if assign_to_key_group(k, 128) <= 63]
    hi_keys = [k for k in keys if assign_to_key_group(k, 128) > 63]
    assert lo_keys and hi_keys
    assert sorted(map(str, lo.get_keys("v"))) == sorted(map(str, lo_keys))
    assert sorted(map(str, hi.get_keys("v"))) == sorted(map(str, hi_keys))
    assert _dump(lo, lo_keys) == {k: expected[k] for k in lo_keys}
    assert _dump(hi, hi_keys) == {k: expected[k] for k in hi_keys}
    assert set(lo.snapshot_sync()()) | set(hi.snapshot_sync()()) == set(snap)

    # and back to one subtask from both halves
    merged = create_keyed_state_backend(src_kind, FULL, 128, "merged")
    merged.restore_keyed(lo.snapshot_sync()())
    merged.restore_keyed(hi.snapshot_sync()())
    assert _dump(merged, keys) == expected
    for b in (src, same, lo, hi, merged):
        b.dispose()


def test_rocksdb_uses_and_removes_a_temp_directory():
    b = create_keyed_state_backend("rocksdb", FULL, 128, "op/with spaces")
    assert isinstance(b, RocksDBKeyedStateBackend)
    path = b.path
    assert os.path.isdir(path)
    b.set_current_key(1)
    b.get_partitioned_state(ValueStateDescriptor("v")).update(1)
    b.dispose()
    assert not os.path.exists(path)


def test_unknown_backend():
    with pytest.raises(ConfigurationError, match="unknown state backend"):
        create_keyed_state_backend("leveldb", FULL, 128, "x")
