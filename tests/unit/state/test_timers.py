from __future__ import annotations

import pytest

from runtime.core.keygroups import KeyGroupRange, assign_to_key_group
from runtime.state import create_keyed_state_backend
from runtime.state.timers import InternalTimer, InternalTimerService
from tests.harness import ALL_KEY_GROUPS, FakeProcessingTimeService

pytestmark = pytest.mark.unit


class Recorder:
    def __init__(self, backend):
        self.backend = backend
        self.fired: list[tuple[str, int, object, object, object]] = []
        self.on_fire = None

    def on_event_time(self, timer: InternalTimer) -> None:
        # the backend's current key is the timer's key
        self.fired.append(("event", timer.timestamp, timer.key, timer.namespace, self.backend.get_current_key()))
        if self.on_fire:
            self.on_fire(timer)

    def on_processing_time(self, timer: InternalTimer) -> None:
        self.fired.append(("proc", timer.timestamp, timer.key, timer.namespace, self.backend.get_current_key()))


def make(rng=ALL_KEY_GROUPS):
    b = create_keyed_state_backend("hashmap", rng, 128, "t")
    pts = FakeProcessingTimeService()
    rec = Recorder(b)
    rounds = []
    svc = InternalTimerService("timers", b, pts, rec, after_processing_timers=lambda: rounds.append(len(rec.fired)))
    return b, pts, rec, svc, rounds


def test_event_timers_order_dedup_delete():
    b, _, rec, svc, _ = make()
    for key, ts in [("a", 30), ("b", 10), ("c", 20), ("d", 10), ("a", 10), ("a", 30)]:
        b.set_current_key(key)
        svc.register_event_time_timer(None, ts)
    b.set_current_key("c")
    svc.delete_event_time_timer(None, 20)
    svc.register_event_time_timer("ns", 20)
    assert svc.num_event_time_timers() == 5
    svc.advance_watermark(15)
    assert [(f[1], f[2]) for f in rec.fired] == [(10, "b"), (10, "d"), (10, "a")]  # ties: insertion order
    assert all(f[2] == f[4] for f in rec.fired)
    svc.advance_watermark(100)
    assert [(f[1], f[2], f[3]) for f in rec.fired[3:]] == [(20, "c", "ns"), (30, "a", None)]
    assert svc.num_event_time_timers() == 0 and svc.current_watermark() == 100


def test_timers_registered_while_firing_fire_in_the_same_advance():
    b, _, rec, svc, _ = make()
    b.set_current_key("k")
    svc.register_event_time_timer(None, 5)

    def again(timer):
        if timer.timestamp == 5:
            svc.register_event_time_timer(None, 7)
            svc.register_event_time_timer(None, 50)

    rec.on_fire = again
    svc.advance_watermark(10)
    assert [f[1] for f in rec.fired] == [5, 7]
    assert svc.num_event_time_timers() == 1


def test_firing_honours_timers_deleted_added_or_earlier_during_a_round():
    """Timers of one timestamp fire as a bucket; what a firing timer changes still counts: a deleted
    timer of the same round does not fire, an earlier one fires next, the same one again fires again."""
    b, _, rec, svc, _ = make()
    for key in "abcd":
        b.set_current_key(key)
        svc.register_event_time_timer(None, 20)

    def act(timer):
        if timer.key == "a" and timer.timestamp == 20:
            b.set_current_key("c")
            svc.delete_event_time_timer(None, 20)  # c's timer of this round: gone
            b.set_current_key("z")
            svc.register_event_time_timer(None, 15)  # earlier than the round: fires next
        if timer.key == "b" and [f[2] for f in rec.fired].count("b") == 1:
            svc.register_event_time_timer(None, 20)  # b again, same time: fires again, after d

    rec.on_fire = act
    svc.advance_watermark(30)
    assert [(f[1], f[2]) for f in rec.fired] == [(20, "a"), (15, "z"), (20, "b"), (20, "d"), (20, "b")]
    assert all(f[2] == f[4] for f in rec.fired)
    assert svc.num_event_time_timers() == 0


def test_processing_timers_use_one_physical_timer():
    b, pts, rec, svc, rounds = make()
    for key, ts in [("a", 100), ("b", 50), ("c", 200), ("a", 50)]:
        b.set_current_key(key)
        svc.register_processing_time_timer(None, ts)
    assert pts.registered == [100, 50]  # re-registered only for an earlier timer
    b.set_current_key("c")
    svc.delete_processing_time_timer(None, 200)
    pts.advance_to(60)
    assert [(f[1], f[2]) for f in rec.fired] == [(50, "b"), (50, "a")]
    assert rounds == [2]
    pts.advance_to(1000)
    assert [(f[1], f[2]) for f in rec.fired] == [(50, "b"), (50, "a"), (100, "a")]
    assert svc.num_processing_time_timers() == 0 and pts.pending == 0


def test_snapshot_restore_takes_own_key_groups():
    b, _, _, svc, _ = make()
    keys = list(range(50))
    for k in keys:
        b.set_current_key(k)
        svc.register_event_time_timer(None, 100 + k)
        svc.register_processing_time_timer("w", 1000 + k)
    snap = svc.snapshot_sync()()
    kg = assign_to_key_group(3, 128)
    assert snap[kg]["__timers__/timers/event"][0] == "timer" and (3, None, 103) in snap[kg]["__timers__/timers/event"][1]
    assert (3, "w", 1003) in snap[kg]["__timers__/timers/processing"][1]
    b2, pts2, rec2, svc2, _ = make(KeyGroupRange(0, 63))
    svc2.restore_keyed(snap)
    assert pts2.pending == 1  # processing-time timers are armed again
    mine = [k for k in keys if assign_to_key_group(k, 128) <= 63]
    assert svc2.num_event_time_timers() == len(mine) and svc2.num_processing_time_timers() == len(mine)
    svc2.advance_watermark(10_000)
    assert [f[2] for f in rec2.fired] == sorted(mine)
    pts2.advance_to(10_000)
    assert [f[2] for f in rec2.fired if f[0] == "proc"] == sorted(mine)
