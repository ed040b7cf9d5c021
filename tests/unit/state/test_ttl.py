"""State TTL (Flink's StateTtlConfig) on both backends, with an injected clock."""
from __future__ import annotations

import pytest

from runtime.api.common import Time
from runtime.api.datastream.functions import AggregateFunction
from runtime.api.datastream.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from runtime.core.keygroups import KeyGroupRange
from runtime.state import create_keyed_state_backend

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.s = 1000.0

    def __call__(self) -> float:
        return self.s


@pytest.fixture(params=["hashmap", "rocksdb"])
def backend(request):
    b = create_keyed_state_backend(request.param, KeyGroupRange(0, 127), 128, f"ttl-{request.param}")
    b.ttl_clock = Clock()
    yield b
    b.dispose()


def ttl(seconds: float = 10, update: str = StateTtlConfig.UpdateType.OnCreateAndWrite,
        visibility: str = StateTtlConfig.StateVisibility.NeverReturnExpired) -> StateTtlConfig:
    return StateTtlConfig.new_builder(Time.milliseconds(int(seconds * 1000))).set_update_type(update).set_state_visibility(visibility).build()


def described(d, config):
    d.enable_time_to_live(config)
    return d


def test_a_value_expires_ttl_after_its_last_write_and_is_removed_when_read(backend) -> None:
    s = backend.get_partitioned_state(described(ValueStateDescriptor("v"), ttl(10)))
    backend.set_current_key("a")
    s.update(1)
    backend.ttl_clock.s += 9.999
    assert s.value() == 1  # reading does not extend it (OnCreateAndWrite)
    backend.ttl_clock.s += 0.001
    assert s.value() is None
    assert list(backend.get_keys("v")) == []  # cleaned up on access
    s.update(2)
    backend.ttl_clock.s += 5
    s.update(3)  # a write extends it
    backend.ttl_clock.s += 9
    assert s.value() == 3


def test_on_read_and_write_extends_on_every_read_and_expired_values_may_be_returned_once(backend) -> None:
    read = backend.get_partitioned_state(described(ValueStateDescriptor("r"), ttl(10, StateTtlConfig.UpdateType.OnReadAndWrite)))
    visible = backend.get_partitioned_state(
        described(ValueStateDescriptor("e"), ttl(10, visibility=StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp))
    )
    backend.set_current_key("k")
    read.update("x")
    visible.update("y")
    for _ in range(3):
        backend.ttl_clock.s += 8
        assert read.value() == "x"
    backend.ttl_clock.s += 10
    assert read.value() is None
    assert visible.value() == "y"  # expired but not cleaned up yet: returned, then removed
    assert visible.value() is None


def test_list_elements_and_map_entries_expire_one_by_one(backend) -> None:
    lst = backend.get_partitioned_state(described(ListStateDescriptor("l"), ttl(10)))
    mp = backend.get_partitioned_state(described(MapStateDescriptor("m"), ttl(10)))
    backend.set_current_key(7)
    lst.add("old")
    mp.put("old", 1)
    backend.ttl_clock.s += 6
    lst.add_all(["new1", "new2"])
    mp.put_all({"new": 2})
    assert lst.get() == ["old", "new1", "new2"] and sorted(mp.items()) == [("new", 2), ("old", 1)]
    backend.ttl_clock.s += 5
    assert lst.get() == ["new1", "new2"]
    assert mp.get("old") is None and not mp.contains("old") and mp.items() == [("new", 2)]
    backend.ttl_clock.s += 10
    assert lst.get() == [] and mp.is_empty()
    assert list(backend.get_keys("l")) == [] and list(backend.get_keys("m")) == []


class Count(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


def test_reducing_and_aggregating_states_expire_as_a_whole(backend) -> None:
    red = backend.get_partitioned_state(described(ReducingStateDescriptor("s", lambda a, b: a + b), ttl(10)))
    agg = backend.get_partitioned_state(described(AggregatingStateDescriptor("c", Count()), ttl(10)))
    backend.set_current_key("k")
    red.add(1)
    agg.add("x")
    backend.ttl_clock.s += 6
    red.add(2)  # a write: the sum lives 10 s from now
    agg.add("y")
    backend.ttl_clock.s += 6
    assert red.get() == 3 and agg.get() == 2
    backend.ttl_clock.s += 5
    assert red.get() is None and agg.get() is None
    red.add(5)
    assert red.get() == 5


@pytest.mark.parametrize("dst_kind", ["hashmap", "rocksdb"])
def test_timestamps_survive_a_snapshot_and_a_restore_into_either_backend(backend, dst_kind) -> None:
    d = described(ValueStateDescriptor("v"), ttl(10))
    s = backend.get_partitioned_state(d)
    for k in range(20):
        backend.set_current_key(k)
        s.update(k)
        backend.ttl_clock.s += 1  # key k written at 1000 + k
    snap = backend.snapshot_sync()()
    dst = create_keyed_state_backend(dst_kind, KeyGroupRange(0, 127), 128, "ttl-restored")
    try:
        dst.ttl_clock = Clock()
        dst.ttl_clock.s = 1000 + 15  # keys 0..5 have expired
        dst.restore_keyed(snap)
        r = dst.get_partitioned_state(d)
        got = {}
        for k in range(20):
            dst.set_current_key(k)
            got[k] = r.value()
        assert got == {k: (k if k > 5 else None) for k in range(20)}
    finally:
        dst.dispose()


def test_a_value_written_without_ttl_counts_as_written_now_and_the_config_is_validated(backend) -> None:
    plain = backend.get_partitioned_state(ValueStateDescriptor("v"))
    backend.set_current_key("a")
    plain.update("from an old savepoint")
    with_ttl = backend.get_partitioned_state(described(ValueStateDescriptor("v"), ttl(10)))
    assert with_ttl.value() == "from an old savepoint"
    with pytest.raises(ValueError, match="positive"):
        StateTtlConfig.new_builder(Time.milliseconds(0))
    with pytest.raises(ValueError, match="update type"):
        StateTtlConfig.new_builder(Time.seconds(1)).set_update_type("Sometimes")
    with pytest.raises(TypeError, match="StateTtlConfig"):
        ValueStateDescriptor("x").enable_time_to_live({"ttl": 1})
    disabled = StateTtlConfig.new_builder(Time.seconds(1)).set_update_type(StateTtlConfig.UpdateType.Disabled).build()
    d = ValueStateDescriptor("x")
    d.enable_time_to_live(disabled)
    assert d.ttl_config is None
