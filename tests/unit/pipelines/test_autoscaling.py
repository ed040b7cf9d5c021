"""The autoscaling sensor's decisions: busy vertices scale up, idle ones down, within bounds and a cooldown."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from pipelines.autoscaling import AutoscalerSettings, VertexLoad, decide

pytestmark = pytest.mark.unit

S = AutoscalerSettings(target_utilization=0.7, utilization_boundary=0.2, min_parallelism=1, max_parallelism=4, cooldown_s=30)


def loads(src_busy: float, win_busy: float, p: int = 2) -> list[VertexLoad]:
    return [VertexLoad("src", "events", p, src_busy, 0.0), VertexLoad("win", "window", p, win_busy, 0.0)]


def test_a_saturated_vertex_scales_the_job_up_to_what_it_needs_within_the_maximum() -> None:
    d = decide(loads(0.3, 1.0), S, now=100, last_change=None)
    assert d.change and d.parallelism == {"src": 3, "win": 3}  # ceil(2 x 1.0 / 0.7)
    assert "'window' busy 100% at 2 -> 3" in d.reason
    assert decide(loads(0.3, 1.0, p=4), S, now=100, last_change=None).change is False  # at the maximum


def test_an_idle_job_scales_down_and_a_job_in_the_band_stays() -> None:
    d = decide(loads(0.1, 0.2, p=4), S, now=100, last_change=None)
    assert d.change and d.parallelism == {"src": 2, "win": 2}  # ceil(4 x 0.2 / 0.7)
    assert not decide(loads(0.6, 0.7), S, now=100, last_change=None).change


def test_nothing_changes_within_the_cooldown_and_bad_settings_are_refused() -> None:
    d = decide(loads(0.3, 1.0), S, now=100, last_change=90)
    assert not d.change and "cooling down (20s left)" in d.reason
    with pytest.raises(ValidationError, match="min_parallelism 3 is above max_parallelism 2"):
        AutoscalerSettings(min_parallelism=3, max_parallelism=2)
