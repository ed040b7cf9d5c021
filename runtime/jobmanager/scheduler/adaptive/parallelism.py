"""How parallel a job can run on the slots it holds (Flink: SlotSharingSlotAllocator.determineParallelism).

Pure. Each slot sharing group runs its vertices' subtasks in shared slots, so a group at parallelism
p needs p slots; the groups split the slots. A vertex runs at its group's slots, clamped to its
[lower, upper] bounds. None: not even every vertex's lower bound fits.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from runtime.rpc.messages import VertexParallelismBounds  # the bounds travel in RPC and REST


@dataclass(frozen=True)
class VertexSlots:
    vertex_id: str
    slot_sharing_group: str
    lower: int
    upper: int


__all__ = ["VertexParallelismBounds", "VertexSlots", "desired_slots", "determine_parallelism", "minimum_slots"]


def minimum_slots(vertices: Sequence[VertexSlots]) -> int:
    """The slots the job needs at its lower bounds: per group, its largest lower bound."""
    return sum(_by_group(vertices, lambda v: v.lower).values())


def desired_slots(vertices: Sequence[VertexSlots]) -> int:
    """The slots the job can use at its upper bounds."""
    return sum(_by_group(vertices, lambda v: v.upper).values())


def determine_parallelism(vertices: Sequence[VertexSlots], slots: int) -> dict[str, int] | None:
    """Each vertex's parallelism on `slots` slots; None if the minimum does not fit."""
    if slots < minimum_slots(vertices):
        return None
    lows = _by_group(vertices, lambda v: v.lower)
    highs = _by_group(vertices, lambda v: v.upper)
    groups = sorted(lows)
    given = dict(lows)
    left = slots - sum(lows.values())
    # hand the rest out one slot at a time, round-robin, to groups below their upper bound: an even
    # split, each group capped at what it can use
    while left > 0:
        growing = [g for g in groups if given[g] < highs[g]]
        if not growing:
            break
        for g in growing:
            if left == 0:
                break
            given[g] += 1
            left -= 1
    return {v.vertex_id: max(v.lower, min(v.upper, given[v.slot_sharing_group])) for v in vertices}


def _by_group(vertices: Sequence[VertexSlots], value: Callable[[VertexSlots], int]) -> Mapping[str, int]:
    out: dict[str, int] = {}
    for v in vertices:
        out[v.slot_sharing_group] = max(out.get(v.slot_sharing_group, 0), value(v))
    return out
