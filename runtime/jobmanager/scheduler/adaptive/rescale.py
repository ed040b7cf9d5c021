"""When the adaptive scheduler acts on a change of its slots (Flink: DefaultRescaleManager and the
WaitingForResources timeouts). Pure: the clock is injected, the scheduler asks and acts.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RescaleDecision:
    rescale: bool
    why: str
    retry_at: float | None = None  # when to ask again (the cooldown ends)


class RescaleManager:
    """Scale-ups wait for the cooldown (scaling-interval.min) and need min-parallelism-increase;
    forced changes (lost slots, new resource requirements) do not wait."""

    def __init__(self, clock: Callable[[], float], scaling_interval_min_s: float, min_parallelism_increase: int) -> None:
        self.clock = clock
        self.cooldown_s = scaling_interval_min_s
        self.min_increase = min_parallelism_increase
        self.last_change = clock()

    def executing_started(self) -> None:
        self.last_change = self.clock()

    def decide(self, current: Mapping[str, int], proposed: Mapping[str, int] | None, forced: bool = False) -> RescaleDecision:
        if proposed is None:
            return RescaleDecision(False, "the slots do not hold the job's minimum")
        if dict(proposed) == dict(current):
            return RescaleDecision(False, "the parallelism would not change")
        change = sum(proposed.values()) - sum(current.values())
        if forced:
            return RescaleDecision(True, "forced")
        if change < self.min_increase:
            return RescaleDecision(False, f"a change of {change:+d} is below min-parallelism-increase ({self.min_increase})")
        ready_at = self.last_change + self.cooldown_s
        if self.clock() < ready_at:
            return RescaleDecision(False, f"cooling down until {ready_at - self.clock():.1f}s from now", retry_at=ready_at)
        return RescaleDecision(True, f"{change:+d} subtasks")


class ResourceWait:
    """WaitingForResources: the minimum within resource-wait-timeout (None: forever), then more slots
    until none arrived for resource-stabilization-timeout (or the upper bound is reached)."""

    def __init__(self, clock: Callable[[], float], wait_timeout_s: float | None, stabilization_s: float) -> None:
        self.clock = clock
        self.wait_timeout_s = wait_timeout_s
        self.stabilization_s = stabilization_s
        self.since = clock()
        self.last_slot = clock()

    def slots_changed(self) -> None:
        self.last_slot = self.clock()

    def verdict(self, slots: int, minimum: int, desired: int) -> str:
        """"run", "wait" or "fail"."""
        now = self.clock()
        if slots >= desired:
            return "run"
        if slots >= minimum:
            return "run" if now - self.last_slot >= self.stabilization_s else "wait"
        if self.wait_timeout_s is not None and now - self.since >= self.wait_timeout_s:
            return "fail"
        return "wait"

    def next_check(self, slots: int, minimum: int) -> float | None:
        """Seconds until the verdict can change without new slots (None: only new slots change it)."""
        now = self.clock()
        if slots >= minimum:
            return max(0.0, self.last_slot + self.stabilization_s - now)
        if self.wait_timeout_s is None:
            return None
        return max(0.0, self.since + self.wait_timeout_s - now)
