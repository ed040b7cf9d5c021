"""The Delta sink's table lease: its rules (pure, on a hand-moved clock) and its register of
generation files (exclusive create, takeover, renewal, release), also from two processes."""
from __future__ import annotations

import multiprocessing
import os
import socket
from pathlib import Path

import pytest

from runtime.core.errors import TableInUseError, TableLeaseLostError
from runtime.storage import table_lease_rules as rules
from runtime.storage.table_lease import LEASE_DIR, LeaseRegister, TableLease, read_lease
from runtime.storage.table_lease_rules import LeaseHolder, LeaseState

pytestmark = pytest.mark.unit

TTL = 60.0


def running(host: str, pid: int) -> bool | None:
    return True


def holder(job: str, now: float, concurrent: bool = False, sink: str = "s", pid: int = 1, host: str = "h") -> LeaseHolder:
    return LeaseHolder(owner=f"{job}/{sink}", job_id=job, operator="out", host=host, pid=pid, concurrent=concurrent,
                       acquired_at=now, renewed_at=now, expires_at=now + TTL)


def take(state: LeaseState, h: LeaseHolder, now: float, is_alive=running) -> LeaseState:
    decision = rules.acquire(state, h, now, is_alive)
    assert decision.state is not None, decision.conflicts
    return decision.state


# --- rules ------------------------------------------------------------------------------------------
def test_a_second_job_is_refused_while_the_first_holds_and_takes_over_once_it_expired() -> None:
    state = take(LeaseState(), holder("a", 1000.0), 1000.0)
    assert state.generation == 1
    refused = rules.acquire(state, holder("b", 1059.0), 1059.9, running)
    assert refused.state is None and [h.job_id for h in refused.conflicts] == ["a"]
    # a's lease ran out at 1060 (not renewed): b takes the table over and a is dropped
    taken = take(state, holder("b", 1060.0), 1060.0)
    assert list(taken.holders) == ["b/s"] and taken.generation == 2


def test_renewal_keeps_the_lease_and_a_dropped_holder_has_lost_it() -> None:
    state = take(LeaseState(), holder("a", 1000.0), 1000.0)
    renewed = rules.renew(state, "a/s", 1050.0, TTL, "h", 1)
    assert renewed is not None and renewed.holders["a/s"].expires_at == 1110.0 and renewed.holders["a/s"].acquired_at == 1000.0
    assert rules.acquire(renewed, holder("b", 1100.0), 1100.0, running).state is None  # 1100 < 1110: still a's
    taken = take(renewed, holder("b", 1110.0), 1110.0)
    assert rules.renew(taken, "a/s", 1111.0, TTL, "h", 1) is None  # a renews too late: it lost the table
    assert rules.check_held(taken, "a/s", 1111.0, 15.0) is not None
    assert rules.check_held(taken, "b/s", 1111.0, 15.0) is None
    assert "expires in 10.0 s" in str(rules.check_held(taken, "b/s", 1160.0, 15.0))


def test_an_expired_holder_in_nobodys_way_is_not_dropped_before_a_timeout_more() -> None:
    state = take(LeaseState(), holder("a", 1000.0, concurrent=True), 1000.0)
    # b shares the table (both append): a's expired record stays, so a that wakes up late renews, not loses
    state = take(state, holder("b", 1070.0, concurrent=True), 1070.0)
    assert set(state.holders) == {"a/s", "b/s"}
    assert rules.renew(state, "a/s", 1075.0, TTL, "h", 1) is not None
    # one more timeout later it is tidied away
    state = take(state, holder("c", 1121.0, concurrent=True), 1121.0)
    assert set(state.holders) == {"b/s", "c/s"}


def test_concurrent_writers_share_with_each_other_but_not_with_an_exclusive_sink() -> None:
    shared = take(LeaseState(), holder("a", 0.0, concurrent=True), 0.0)
    shared = take(shared, holder("b", 1.0, concurrent=True), 1.0)
    assert set(shared.holders) == {"a/s", "b/s"}
    assert [h.job_id for h in rules.acquire(shared, holder("c", 2.0), 2.0, running).conflicts] == ["a", "b"]
    exclusive = take(LeaseState(), holder("c", 0.0), 0.0)
    assert [h.job_id for h in rules.acquire(exclusive, holder("a", 1.0, concurrent=True), 1.0, running).conflicts] == ["c"]


def test_the_same_job_keeps_its_lease_a_recovered_jobmaster_takes_its_record_and_two_sinks_share() -> None:
    state = take(LeaseState(), holder("a", 0.0, pid=10), 0.0)
    recovered = take(state, holder("a", 5.0, pid=20), 5.0)  # same job id and sink: a failover / new JobManager
    assert recovered.holders["a/s"].pid == 20 and recovered.holders["a/s"].acquired_at == 0.0
    two_sinks = take(recovered, holder("a", 6.0, sink="t"), 6.0)
    assert set(two_sinks.holders) == {"a/s", "a/t"}
    released = rules.release(two_sinks, "a/s")
    assert released is not None and set(released.holders) == {"a/t"}
    assert rules.release(released, "a/s") is None  # nothing to write


def test_a_crashed_jobmaster_on_this_host_frees_the_table_at_once() -> None:
    state = take(LeaseState(), holder("a", 0.0, pid=4242), 0.0)

    def only_4242_died(host: str, pid: int) -> bool | None:
        return pid != 4242

    assert rules.acquire(state, holder("b", 1.0), 1.0, only_4242_died).state is not None
    # on another host nobody can tell: only the expiry frees it
    assert rules.acquire(state, holder("b", 1.0), 1.0, lambda host, pid: None).state is None


def test_due_for_renewal() -> None:
    h = holder("a", 0.0)
    assert not rules.due_for_renewal(h, 14.9, 15.0) and rules.due_for_renewal(h, 15.0, 15.0)


# --- the register in files ------------------------------------------------------------------------
class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def lease(table: Path, job: str, clock: Clock, **kw) -> TableLease:
    return TableLease(str(table), job, "sink1", job_name=f"name-{job}", operator="delta: out", clock=clock,
                      is_alive=kw.pop("is_alive", running), timeout_s=TTL, **kw)


def test_acquire_refuse_renew_take_over_and_release_on_disk(tmp_path: Path) -> None:
    clock = Clock()
    table = tmp_path / "t"
    a = lease(table, "job-a", clock)
    a.acquire()
    assert sorted(os.listdir(table)) == [LEASE_DIR]
    b = lease(table, "job-b", clock)
    with pytest.raises(TableInUseError) as refused:
        b.acquire()
    message = str(refused.value)
    assert str(table) in message and "job job-a ('name-job-a')" in message and socket.gethostname() in message
    assert "allow_concurrent_writers=True" in message and "expires in 60 s" in message
    clock.now += 50
    a.ensure_held()  # due within a renewal interval (15 s): renewed on the spot
    assert read_lease(str(table))["holders"]["job-a/sink1"]["expires_at"] == 1110.0
    clock.now += 59
    with pytest.raises(TableInUseError):
        b.acquire()
    clock.now += 1  # 1110: a did not renew again
    b.acquire()
    with pytest.raises(TableLeaseLostError, match="lost its lease"):
        a.ensure_held()
    with pytest.raises(TableLeaseLostError):
        a.ensure_held()  # and stays lost
    b.release()
    assert read_lease(str(table))["holders"] == {}
    assert LeaseRegister(str(table)).remove_if_free() and not (table / LEASE_DIR).exists()


def test_only_the_newest_generations_are_kept_and_a_stale_write_is_not_read(tmp_path: Path) -> None:
    clock = Clock()
    a = lease(tmp_path / "t", "job-a", clock)
    a.acquire()
    for _ in range(10):
        clock.now += 20
        a.renew()
    folder = tmp_path / "t" / LEASE_DIR
    names = sorted(os.listdir(folder))
    assert names == [f"{g:012d}.json" for g in range(8, 12)]
    register = LeaseRegister(str(tmp_path / "t"))
    stale = register.read().model_copy(update={"generation": 5, "holders": {}})  # a writer that read generation 4 long ago
    assert register.write_next(stale) is False  # generation 5 is free, but newer ones exist: not the state
    assert register.read().generation == 11 and "job-a/sink1" in register.read().holders
    assert not (folder / f"{5:012d}.json").exists()


def _race(table: str, job: str, start: multiprocessing.Event, results: multiprocessing.Queue, done: multiprocessing.Event) -> None:
    start.wait()
    try:
        TableLease(table, job, "sink1", operator="out").acquire()
        results.put((job, "held"))
    except TableInUseError:
        results.put((job, "refused"))
    # a JobManager holds its lease while it lives: the winner stays until every racer has tried
    # (an ended winner's dead pid would rightly free the table for a slower racer)
    done.wait(30)


def test_of_processes_racing_for_a_free_table_exactly_one_gets_it(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    start, results, done = ctx.Event(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_race, args=(str(tmp_path / "t"), f"job-{i}", start, results, done)) for i in range(4)]
    for p in procs:
        p.start()
    start.set()
    outcomes = dict(results.get(timeout=30) for _ in procs)
    done.set()
    for p in procs:
        p.join(timeout=30)
    assert sorted(outcomes.values()) == ["held", "refused", "refused", "refused"]
    # the winner's process has ended: on this host its dead pid frees the table at once
    TableLease(str(tmp_path / "t"), "job-next", "sink1").acquire()
