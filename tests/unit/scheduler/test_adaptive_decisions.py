"""The adaptive scheduler's pure decisions: parallelism from slots, rescale timing, resource waits."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime.jobmanager.scheduler.adaptive.parallelism import (
    VertexParallelismBounds,
    VertexSlots,
    desired_slots,
    determine_parallelism,
    minimum_slots,
)
from runtime.jobmanager.scheduler.adaptive.rescale import RescaleManager, ResourceWait

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_one_slot_sharing_group_runs_at_its_slots_within_each_vertex_bounds() -> None:
    vs = [VertexSlots("src", "default", 1, 4), VertexSlots("map", "default", 2, 3)]
    assert (minimum_slots(vs), desired_slots(vs)) == (2, 4)
    assert determine_parallelism(vs, 1) is None  # below map's lower bound
    assert determine_parallelism(vs, 2) == {"src": 2, "map": 2}
    assert determine_parallelism(vs, 3) == {"src": 3, "map": 3}
    assert determine_parallelism(vs, 10) == {"src": 4, "map": 3}  # each capped at its upper bound


def test_slot_sharing_groups_split_the_slots_evenly_up_to_what_each_can_use() -> None:
    vs = [VertexSlots("a", "g1", 1, 8), VertexSlots("b", "g2", 1, 2)]
    assert determine_parallelism(vs, 2) == {"a": 1, "b": 1}
    assert determine_parallelism(vs, 4) == {"a": 2, "b": 2}
    assert determine_parallelism(vs, 7) == {"a": 5, "b": 2}  # g2 is full at 2: the rest goes to g1


def test_bounds_are_checked() -> None:
    with pytest.raises(ValidationError, match="lower bound 3 is above upper bound 2"):
        VertexParallelismBounds(lower_bound=3, upper_bound=2)


def test_scale_ups_wait_for_the_cooldown_and_the_minimum_increase() -> None:
    clock = Clock()
    r = RescaleManager(clock, scaling_interval_min_s=30, min_parallelism_increase=2)
    assert not r.decide({"a": 2}, {"a": 3}).rescale  # +1 < 2
    d = r.decide({"a": 2}, {"a": 4})
    assert not d.rescale and d.retry_at == 1030.0  # cooling down
    clock.now = 1030.0
    assert r.decide({"a": 2}, {"a": 4}).rescale
    assert r.decide({"a": 4}, {"a": 2}, forced=True).rescale  # lost slots do not wait
    assert not r.decide({"a": 4}, {"a": 4}, forced=True).rescale
    assert not r.decide({"a": 4}, None).rescale


def test_resource_wait_runs_at_the_upper_bound_or_once_slots_settle_and_fails_after_the_timeout() -> None:
    clock = Clock()
    w = ResourceWait(clock, wait_timeout_s=60, stabilization_s=10)
    assert w.verdict(slots=0, minimum=1, desired=4) == "wait"
    assert w.next_check(0, 1) == 60
    w.slots_changed()
    assert w.verdict(slots=2, minimum=1, desired=4) == "wait"  # settling
    clock.now += 10
    assert w.verdict(slots=2, minimum=1, desired=4) == "run"
    assert w.verdict(slots=4, minimum=1, desired=4) == "run"
    starved = ResourceWait(clock, wait_timeout_s=60, stabilization_s=10)
    clock.now += 60
    assert starved.verdict(slots=0, minimum=1, desired=4) == "fail"
    assert ResourceWait(clock, None, 10).verdict(0, 1, 4) == "wait"  # reactive: waits forever
