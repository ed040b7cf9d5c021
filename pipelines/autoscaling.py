"""Autoscaling a Millrace job from Dagster (Flink keeps its autoscaler in the Kubernetes operator;
here it is a sensor). Pure decisions: the sensor in `pipelines/autoscaling_sensor.py` feeds them
the job's details from REST and applies what they return.

Flink's autoscaler (JobVertexScaler): a vertex's utilisation is its busy time share; to run at the
target utilisation it needs ceil(parallelism x busy / target) subtasks. A vertex within the
target +/- the boundary keeps its parallelism (no flapping; at or above the upper edge it scales
up, so a saturated vertex does); everything is clamped to the job's [min, max] and nothing changes
within the cooldown after the last change. Busy time leaves out backpressure: a vertex waiting for
its downstream is not the bottleneck, its downstream is.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field, model_validator


class AutoscalerSettings(BaseModel):
    """Flink's job.autoscaler.* in spirit: target utilisation, its boundary, bounds, cooldown."""

    target_utilization: float = Field(0.7, gt=0, le=1, description="busy share a vertex should run at")
    utilization_boundary: float = Field(0.2, ge=0, lt=1, description="no change while busy is within target +/- this")
    min_parallelism: int = Field(1, ge=1)
    max_parallelism: int = Field(4, ge=1)
    cooldown_s: float = Field(60.0, ge=0, description="no decision this long after the last change")

    @model_validator(mode="after")
    def _ordered(self) -> AutoscalerSettings:
        if self.min_parallelism > self.max_parallelism:
            raise ValueError(f"min_parallelism {self.min_parallelism} is above max_parallelism {self.max_parallelism}")
        return self


@dataclass(frozen=True)
class VertexLoad:
    vertex_id: str
    name: str
    parallelism: int
    busy: float  # mean busy share of its subtasks, 0..1
    backpressured: float  # mean backpressured share, 0..1
    max_parallelism: int = 128


@dataclass(frozen=True)
class ScalingDecision:
    parallelism: dict[str, int]  # vertex id -> new upper bound (only when `change`)
    change: bool
    reason: str


def decide(vertices: Sequence[VertexLoad], settings: AutoscalerSettings, now: float, last_change: float | None) -> ScalingDecision:
    """The job's new per-vertex parallelism, or why it stays."""
    current = {v.vertex_id: v.parallelism for v in vertices}
    if not vertices:
        return ScalingDecision(current, False, "the job has no running vertices")
    if last_change is not None and now - last_change < settings.cooldown_s:
        return ScalingDecision(current, False, f"cooling down ({settings.cooldown_s - (now - last_change):.0f}s left)")
    low = settings.target_utilization - settings.utilization_boundary
    high = min(1.0, settings.target_utilization + settings.utilization_boundary)
    wanted: dict[str, int] = {}
    why: list[str] = []
    for v in vertices:
        busy = min(1.0, v.busy)
        target = v.parallelism
        if busy >= high or busy < low:
            target = math.ceil(v.parallelism * busy / settings.target_utilization) if busy > 0 else settings.min_parallelism
        target = max(settings.min_parallelism, min(settings.max_parallelism, v.max_parallelism, target))
        wanted[v.vertex_id] = target
        if target != v.parallelism:
            why.append(f"'{v.name}' busy {busy:.0%} at {v.parallelism} -> {target}")
    # the job's vertices share slots: scale them together, to the largest need (Flink's autoscaler
    # sizes each vertex; one slot sharing group makes the largest one decide the slots anyway)
    top = max(wanted.values())
    proposed = {vid: top for vid in wanted}
    if proposed == current:
        return ScalingDecision(current, False, f"every vertex within {low:.0%}..{high:.0%} busy (or at its bound)")
    return ScalingDecision(proposed, True, "; ".join(why) or f"vertices aligned at {top}")
