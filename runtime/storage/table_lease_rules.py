"""Who may write a Delta table: the rules of the Delta sink's table lease. Pure: no I/O; the time
(`now`) and whether a process still lives (`is_alive`) are parameters, so tests move time by hand.

Why a lease: Delta's optimistic concurrency control only sees commits that overlap in time. Two
jobs whose commits take turns (one's overwrite, then the other's appends) are a legal serial
order to Delta, so two jobs writing one table silently destroy each other's output. The lease
makes "another job's sink writes this table" visible at start, and for as long as that job runs.

The state is a set of holders, one per sink of a job (`owner` = "<job id>/<sink id>"):
- an exclusive holder (the default) shares the table with no other job;
- holders that allow concurrent writers (appends only) share it with each other, not with an
  exclusive one;
- sinks of the same job never conflict (one job may write a table from two sinks, and a
  restarted or recovered run of a job, same job id, keeps its own lease);
- a holder whose lease expired (`expires_at` passed, not renewed in time) or whose JobManager
  process is gone (same host, its pid no longer runs) holds nothing: a sink that it stands in the
  way of drops it when it takes the lease (a takeover). Only a takeover drops a holder (a holder
  that finds itself dropped has lost the table: someone else may have written it since); expired
  holders in nobody's way are tidied away one lease timeout after they expired.

Every transition returns the new state (or who is in the way); the storage layer writes it as
the next generation with an atomic create, so of two transitions from the same state only one lands.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

# (host, pid) -> True (runs), False (gone), None (cannot tell: another host)
IsAlive = Callable[[str, int], "bool | None"]


class LeaseHolder(BaseModel):
    """One sink of one job that holds the table."""

    model_config = {"frozen": True}

    owner: str = Field(description="<job id>/<sink id>: one sink of one job")
    job_id: str
    job_name: str = ""
    operator: str = Field(default="", description="the sink's name in the job")
    host: str = Field(description="the JobManager's host")
    pid: int = Field(description="the JobManager's process id")
    concurrent: bool = Field(default=False, description="allow_concurrent_writers: appends only, shared with other such sinks")
    acquired_at: float
    renewed_at: float
    expires_at: float

    def describe(self, now: float) -> str:
        left = self.expires_at - now
        return (
            f"job {self.job_id}{f' ({self.job_name!r})' if self.job_name else ''}, sink '{self.operator}', "
            f"JobManager {self.host} pid {self.pid}, lease renewed {max(0.0, now - self.renewed_at):.0f} s ago, "
            f"expires in {max(0.0, left):.0f} s"
        )


class LeaseState(BaseModel):
    """The lease of one table: its generation (one more per transition) and its holders."""

    generation: int = 0
    holders: dict[str, LeaseHolder] = Field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    """The state to write, or (state None) the live holders that stand in the way."""

    state: LeaseState | None
    conflicts: list[LeaseHolder] = field(default_factory=list)


def is_expired(holder: LeaseHolder, now: float, is_alive: IsAlive) -> bool:
    """Not renewed in time, or its JobManager's process is known to be gone (a crash on this host)."""
    return holder.expires_at <= now or is_alive(holder.host, holder.pid) is False


def live(state: LeaseState, now: float, is_alive: IsAlive) -> dict[str, LeaseHolder]:
    return {o: h for o, h in state.holders.items() if not is_expired(h, now, is_alive)}


def in_the_way(holders: dict[str, LeaseHolder], request: LeaseHolder) -> list[LeaseHolder]:
    """Live holders that `request` may not share the table with: other jobs, unless both allow concurrent writers."""
    return [h for h in holders.values() if h.job_id != request.job_id and not (h.concurrent and request.concurrent)]


def acquire(state: LeaseState, request: LeaseHolder, now: float, is_alive: IsAlive) -> Decision:
    """`request` takes the lease unless a live holder stands in the way; expired holders in its way
    are dropped (taken over). The same owner taking it again (a recovered JobMaster of the same
    job) replaces its old record."""
    conflicts = in_the_way(live(state, now, is_alive), request)
    if conflicts:
        return Decision(None, sorted(conflicts, key=lambda h: h.acquired_at))
    taken_over = {h.owner for h in in_the_way(state.holders, request)}
    holders = {
        o: h for o, h in state.holders.items()
        if o not in taken_over and o != request.owner and not _long_expired(h, now)
    }
    old = state.holders.get(request.owner)
    if old is not None:  # keep when it was first taken: it is the same job's lease
        request = request.model_copy(update={"acquired_at": old.acquired_at})
    return Decision(LeaseState(generation=state.generation + 1, holders={**holders, request.owner: request}))


def _long_expired(holder: LeaseHolder, now: float) -> bool:
    """Expired for longer than its own lease timeout: a record nobody will renew (tidied away)."""
    return holder.expires_at + (holder.expires_at - holder.renewed_at) <= now


def renew(state: LeaseState, owner: str, now: float, ttl_s: float, host: str, pid: int) -> LeaseState | None:
    """`owner`'s lease extended to now + ttl (by whichever JobManager process holds it now); None
    if it holds nothing any more: another transition dropped it after it expired (the lease is lost)."""
    holder = state.holders.get(owner)
    if holder is None:
        return None
    renewed = holder.model_copy(update={"renewed_at": now, "expires_at": now + ttl_s, "host": host, "pid": pid})
    return LeaseState(generation=state.generation + 1, holders={**state.holders, owner: renewed})


def release(state: LeaseState, owner: str) -> LeaseState | None:
    """The state without `owner`; None if it holds nothing (nothing to write)."""
    if owner not in state.holders:
        return None
    return LeaseState(generation=state.generation + 1, holders={o: h for o, h in state.holders.items() if o != owner})


def check_held(state: LeaseState, owner: str, now: float, margin_s: float) -> str | None:
    """None if `owner` holds the lease for at least `margin_s` more; else why it may not commit."""
    holder = state.holders.get(owner)
    if holder is None:
        return "it no longer holds the table's lease (it expired and was taken over, or was released)"
    if holder.expires_at - now < margin_s:
        return f"its lease expires in {max(0.0, holder.expires_at - now):.1f} s (not renewed in time)"
    return None


def due_for_renewal(holder: LeaseHolder, now: float, renew_every_s: float) -> bool:
    return now - holder.renewed_at >= renew_every_s
