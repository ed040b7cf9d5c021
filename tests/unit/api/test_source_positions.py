"""A source's position is operator state: snapshot between two emit_next calls, restore a fresh
operator (same or another parallelism), and the records continue exactly where they stopped --
none twice, none lost. Plus the non-blocking rate limiter, on an injected clock."""
from __future__ import annotations

import pickle
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pipelines.jobs import live_activity, windowed_sum
from runtime.api.connectors.base import SPLITS_STATE, RateLimiter, RateLimiterStrategy, Source
from runtime.api.connectors.collection import CollectionSource
from runtime.api.connectors.generator import DataGeneratorSource, NumberSequenceSource, refine_split, split_indices
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.operators.base import InputStatus
from runtime.core.errors import InvalidProgramError
from runtime.core.records import MAX_TIMESTAMP, ColumnBatch
from tests.harness import SourceRun, SourceRunCheckpoint

pytestmark = pytest.mark.unit

Splits = list[Any]


class FakeClock:
    """Seconds; the test moves it."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def no_sleeping(monkeypatch: pytest.MonkeyPatch) -> None:
    """A source must never sleep on the task thread."""

    def forbidden(_s: float) -> None:
        raise AssertionError("a source slept inside emit_next")

    monkeypatch.setattr(time, "sleep", forbidden)


# -- driving a source's subtasks like the runtime does (tests.harness.SourceRun) ------------------


def deal(per_old_subtask: list[Splits], new_parallelism: int) -> list[Splits]:
    """What the runtime hands each new subtask (runtime.storage.state_files): unchanged parallelism,
    each gets its own; else all items in (old subtask, seq) order, dealt in contiguous even ranges."""
    if len(per_old_subtask) == new_parallelism:
        return [list(s) for s in per_old_subtask]
    items = [x for s in per_old_subtask for x in s]
    base, extra = divmod(len(items), new_parallelism)
    out, start = [], 0
    for i in range(new_parallelism):
        n = base + (1 if i < extra else 0)
        out.append(items[start : start + n])
        start += n
    return out


def deal_round_robin(per_old_subtask: list[Splits], new_parallelism: int) -> list[Splits]:
    items = [x for s in per_old_subtask for x in s]
    return [items[i::new_parallelism] for i in range(new_parallelism)]


def checkpoint(run: SourceRun) -> SourceRunCheckpoint:
    cp = run.checkpoint()
    for splits in cp.splits:
        assert pickle.loads(pickle.dumps(splits)) == splits  # plain, picklable values
        assert all(isinstance(s, tuple) for s in splits)
    return cp


def uninterrupted(source: Source, parallelism: int) -> list[list[Any]]:
    run = SourceRun(source, parallelism).run()
    return [run.values(i) for i in range(parallelism)]


def interrupted(source: Source, parallelism: int, batches_before: int) -> list[list[Any]]:
    """Each subtask: `batches_before` batches, a checkpoint, a fresh run restored from it, to the end."""
    first = SourceRun(source, parallelism)
    for i in range(parallelism):
        first.steps(i, batches_before)
    cp = checkpoint(first)  # the failed attempt is torn down; nothing after the checkpoint counts
    second = SourceRun(source, parallelism, restored=cp).run()
    return [first.values(i) + second.values(i) for i in range(parallelism)]


def rescaled(source: Source, old_p: int, new_p: int, batches_before: list[int], dealer: Any = deal) -> tuple[list[Any], list[list[Any]]]:
    """Run old_p subtasks some batches each, checkpoint, restore into new_p subtasks, run to the end."""
    run = SourceRun(source, old_p)
    for i in range(old_p):
        run.steps(i, batches_before[i])
    cp = checkpoint(run)
    before = [v for i in range(old_p) for v in run.values(i)]
    after = SourceRun(source, new_p, restored=SourceRunCheckpoint(cp.coordinator, dealer(cp.splits, new_p))).run()
    return before, [after.values(j) for j in range(new_p)]


def ended_run(source: Source) -> SourceRunCheckpoint:
    """The checkpoint of a run that emitted everything: no split left anywhere."""
    return SourceRun(source, 1).run().checkpoint()


def assert_exactly_once(got: list[Any], expected: list[Any]) -> None:
    dupes = len(got) - len(set(got))
    missing = set(expected) - set(got)
    extra = set(got) - set(expected)
    assert not dupes and not missing and not extra, f"{dupes} duplicated, {len(missing)} missing, {len(extra)} unexpected"


# -- DataGeneratorSource / NumberSequenceSource --------------------------------------------------


def ids(i: np.ndarray) -> dict[str, np.ndarray]:
    return {"id": i, "sq": i * i}


@pytest.mark.parametrize("parallelism", [1, 3])
@pytest.mark.parametrize("k", [0, 1, 4, 13, 1000])
def test_generator_restored_from_its_snapshot_continues_exactly_where_it_stopped(parallelism: int, k: int) -> None:
    src = DataGeneratorSource(lambda i: (i, i * 3), 250, batch_size=7)
    assert interrupted(src, parallelism, k) == uninterrupted(src, parallelism)


def test_generator_batch_path_and_number_sequence_restore_the_same_way() -> None:
    batched = DataGeneratorSource(None, 300, batch_generator=ids, batch_size=16)
    assert interrupted(batched, 2, 5) == uninterrupted(batched, 2)
    seq = NumberSequenceSource(10, 99, batch_size=8)
    assert interrupted(seq, 3, 2) == uninterrupted(seq, 3)
    assert sorted(v for o in interrupted(seq, 3, 2) for v in o) == list(range(10, 100))


@pytest.mark.parametrize(
    "old_p,new_p,before",
    [(2, 3, [3, 5]), (3, 2, [1, 0, 4]), (2, 1, [2, 2]), (1, 4, [6]), (4, 4, [1, 2, 3, 0]), (2, 7, [0, 9])],
)
@pytest.mark.parametrize("dealer", [deal, deal_round_robin])
def test_generator_rescaled_restore_emits_every_remaining_record_exactly_once(old_p: int, new_p: int, before: list[int], dealer: Any) -> None:
    n = 1000
    src = DataGeneratorSource(lambda i: i, n, batch_size=10)
    emitted, after = rescaled(src, old_p, new_p, before, dealer)
    assert len(emitted) == sum(before) * 10
    assert_exactly_once(emitted + [v for o in after for v in o], list(range(n)))
    for out in after:
        assert out == sorted(out)  # each subtask still walks forward: monotonous event time stays monotonous
    # the remaining work is spread over the new subtasks, not left to one of them
    assert all(len(o) > 0 for o in after)
    assert max(len(o) for o in after) <= 2 * (n - len(emitted)) / new_p + 10


def test_generator_rescaled_subtasks_still_advance_through_the_index_space_together() -> None:
    src = DataGeneratorSource(lambda i: i, 100_000, batch_size=10)
    _, after = rescaled(src, 2, 3, [100, 100])
    for k in range(0, 2000, 100):  # the k-th record of every new subtask comes from the same region
        firsts = [o[k] for o in after]
        assert max(firsts) - min(firsts) < 3 * 10 * 128


def test_generator_chained_restores_at_changing_parallelism() -> None:
    n = 5000
    src = DataGeneratorSource(None, n, batch_generator=lambda i: {"id": i}, batch_size=25)
    seen: list[int] = []
    cp: SourceRunCheckpoint | None = None
    for p, steps in ((2, 7), (5, 3), (3, 11), (1, 4)):
        run = SourceRun(src, p, restored=None if cp is None else SourceRunCheckpoint(cp.coordinator, deal(cp.splits, p)))
        for i in range(p):
            run.steps(i, steps)
            seen += [r.id for r in run.values(i)]
        cp = checkpoint(run)
    assert cp is not None
    last = SourceRun(src, 2, restored=SourceRunCheckpoint(cp.coordinator, deal(cp.splits, 2))).run()
    seen += [r.id for j in range(2) for r in last.values(j)]
    assert_exactly_once(seen, list(range(n)))


def test_generator_snapshot_stays_small_for_huge_counts_and_lists_the_remaining_indices() -> None:
    src = DataGeneratorSource(lambda i: i, 10**12, batch_size=100)
    run = SourceRun(src, 4, max_parallelism=128)
    run.steps(1, 3)
    splits = checkpoint(run).splits[1]
    assert 0 < len(splits) <= 128 // 4 + 1
    assert all(len(x) == 4 and all(type(v) is int for v in x) for x in splits)
    # refining keeps exactly the indices of the split, in order
    small = (103, 2000, 10, 3)
    pieces = refine_split(small, 16)
    assert sorted(i for p in pieces for i in split_indices(p)) == split_indices(small)
    assert split_indices(small)[:8] == [103, 104, 105, 106, 107, 108, 109, 130]


def test_generator_restored_with_no_splits_left_ends_with_the_final_watermark() -> None:
    src = DataGeneratorSource(lambda i: i, 1000, batch_size=10)
    done = ended_run(src)  # a run that ran dry checkpoints no splits, here or at the enumerator
    assert done.splits == [[]] and pickle.loads(done.coordinator or b"")["enumerator"] == []
    again = SourceRun(src, 3, restored=SourceRunCheckpoint(done.coordinator, [[], [], []])).run()
    for out in again.outs:
        assert out.batches == [] and out.watermarks == [MAX_TIMESTAMP]
    assert [r for o in SourceRun(DataGeneratorSource(lambda i: i, 0), 2).run().outs for r in o.values()] == []


def test_generator_rejects_foreign_splits_and_enumerator_states() -> None:
    src = DataGeneratorSource(lambda i: i, 1000, batch_size=10)
    with pytest.raises(InvalidProgramError, match="not a DataGeneratorSource split"):
        SourceRun(src, 1, restored=SourceRunCheckpoint(None, [[("part-0.parquet", 3)]]))
    foreign = pickle.dumps({"version": 1, "enumerator": {"pending": ["part-0.parquet"]}})
    with pytest.raises(InvalidProgramError, match="not this source's"):
        SourceRun(src, 1, restored=SourceRunCheckpoint(foreign, [[]]))


def test_generator_positional_arguments_still_mean_what_they_did() -> None:
    strategy = RateLimiterStrategy.per_second(10)
    src = DataGeneratorSource(lambda i: i, 10, None, strategy)
    assert src.rate_limiter_strategy is strategy and src.batch_generator is None
    with pytest.raises(InvalidProgramError, match="rate_limiter_strategy"):
        DataGeneratorSource(lambda i: i, 10, None, ids)  # the old 4th positional (batch_generator)


# -- rate limiting -------------------------------------------------------------------------------


def test_rate_limiter_is_a_non_blocking_token_bucket() -> None:
    clock = FakeClock()
    lim = RateLimiter(100, clock, 0.05)  # batches of 1/20 s: 5 permits
    assert lim.batch_size == 5
    assert lim.try_acquire(5)  # the first batch goes at once
    assert not lim.try_acquire(1)
    assert lim.seconds_until_available(5) == pytest.approx(0.05)
    clock.now += 0.03
    assert lim.try_acquire(3) and not lim.try_acquire(1)
    clock.now += 10.0  # a long stall: at most 1 s worth of catching up
    assert lim.try_acquire(5) and sum(lim.try_acquire(5) for _ in range(100)) == 19
    clock.now -= 5.0  # a clock going backwards gives nothing and takes nothing
    assert not lim.try_acquire(1)
    with pytest.raises(ValueError):
        lim.try_acquire(1000)
    with pytest.raises(InvalidProgramError):
        RateLimiter(0)
    with pytest.raises(InvalidProgramError):
        RateLimiterStrategy.per_second(-1)
    assert RateLimiterStrategy.no_op().create_rate_limiter(3) is None
    limiter = RateLimiterStrategy.per_second(300).create_rate_limiter(3)
    assert limiter is not None and limiter.permits_per_second == 100


def test_throttled_generator_reports_nothing_available_when_ahead_and_keeps_the_rate() -> None:
    clock = FakeClock()
    src = DataGeneratorSource(lambda i: i, 10_000, rate_limiter_strategy=RateLimiterStrategy.per_second(400, clock=clock, batch_seconds=0.05), batch_size=64)
    run = SourceRun(src, 4)  # subtask 1's share: 100 records/s, batches of 5
    assert run.step(1) is InputStatus.MORE_AVAILABLE
    assert run.step(1) is InputStatus.NOTHING_AVAILABLE  # ahead of the budget: no sleeping, no records
    assert len(run.values(1)) == 5
    statuses = []
    for _ in range(400):  # 2 simulated seconds, polled every 5 ms like the task loop does
        clock.now += 0.005
        statuses.append(run.step(1))
    assert InputStatus.NOTHING_AVAILABLE in statuses and InputStatus.MORE_AVAILABLE in statuses
    got = run.values(1)
    assert 5 + 195 <= len(got) <= 5 + 205
    sizes = [len(b) for b in run.outs[1].batches]  # smooth: 1/20 s worth per batch (less at a chunk's end)
    assert max(sizes) == 5 and sizes.count(5) >= 0.9 * len(sizes)
    # the records are the subtask's own chunks, in order, as without a rate
    assert got == SourceRun(DataGeneratorSource(lambda i: i, 10_000, batch_size=64), 4).run().values(1)[: len(got)]


def test_throttled_and_unthrottled_generators_emit_the_same_records() -> None:
    clock = FakeClock()
    plain = DataGeneratorSource(None, 3000, batch_generator=ids, batch_size=256)
    throttled = DataGeneratorSource(
        None, 3000, rate_limiter_strategy=RateLimiterStrategy.per_second(2000, clock=clock, batch_seconds=0.05), batch_generator=ids, batch_size=256
    )
    run = SourceRun(throttled, 2)
    reference = SourceRun(plain, 2).run()
    for i in range(2):
        while not run.ended[i]:
            if run.step(i) is InputStatus.NOTHING_AVAILABLE:
                clock.now += 0.01
        assert all(isinstance(b, ColumnBatch) and len(b) <= 50 for b in run.outs[i].batches)
        assert run.values(i) == reference.values(i)
        assert run.outs[i].watermarks == [MAX_TIMESTAMP]


def test_throttled_generator_snapshot_inside_a_chunk_keeps_its_next_index() -> None:
    clock = FakeClock()
    src = DataGeneratorSource(lambda i: i, 500, rate_limiter_strategy=RateLimiterStrategy.per_second(100, clock=clock, batch_seconds=0.05), batch_size=100)
    run = SourceRun(src, 1)
    for _ in range(3):
        assert run.step(0) is InputStatus.MORE_AVAILABLE
        clock.now += 0.05
    assert run.values(0) == list(range(15))
    cp = checkpoint(run)
    assert min(cp.splits[0])[0] == 15  # the partly emitted chunk [0, 100) goes on at 15
    fresh_clock = FakeClock(0.0)
    again = DataGeneratorSource(lambda i: i, 500, rate_limiter_strategy=RateLimiterStrategy.per_second(10**6, clock=fresh_clock), batch_size=100)
    rest = SourceRun(again, 1, restored=cp)
    while not rest.ended[0]:
        fresh_clock.now += 1.0
        rest.step(0)
    assert run.values(0) + rest.values(0) == list(range(500))


# -- collection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("k", [0, 1, 3, 10])
def test_collection_source_restores_its_position(k: int) -> None:
    src = CollectionSource([f"v{i}" for i in range(103)], batch_size=10)
    assert interrupted(src, 1, k) == uninterrupted(src, 1)
    first = SourceRun(src, 1)
    first.steps(0, 4)
    assert checkpoint(first).splits == [[(40, 103)]]


def test_collection_source_columnar_restore_and_no_splits() -> None:
    from runtime.api.common import Types

    rows = [(i, f"n{i}") for i in range(25)]
    src = CollectionSource(rows, Types.ROW_NAMED(["id", "name"], [Types.LONG(), Types.STRING()]), batch_size=4)
    assert interrupted(src, 1, 3) == uninterrupted(src, 1)
    done = ended_run(src)
    (out,) = SourceRun(src, 1, restored=done).run().outs
    assert out.batches == [] and out.watermarks == [MAX_TIMESTAMP]
    with pytest.raises(InvalidProgramError, match="not a split"):
        SourceRun(src, 1, restored=SourceRunCheckpoint(done.coordinator, [[(0, 999)]]))


# -- the rate source of live_activity --------------------------------------------------------------


def test_live_activity_rate_source_is_unbounded_throttled_and_resumes_from_its_position() -> None:
    clock = FakeClock()
    src = live_activity.RateEventSource(rate=200, batches_per_second=5, clock=clock)
    assert not src.is_bounded()

    def pull(s: SourceRun, batches: int) -> None:
        got = 0
        while got < batches:
            status = s.step(0)
            assert status is not InputStatus.END_OF_INPUT
            if status is InputStatus.NOTHING_AVAILABLE:
                clock.now += 0.05
            else:
                got += 1

    def key(s: SourceRun) -> list[tuple[int, int]]:
        return [(r.user_id, r.value) for r in s.values(0)]

    a = SourceRun(src, 2)
    pull(a, 3)
    assert [len(b) for b in a.outs[0].batches] == [20, 20, 20]  # 100/s for this subtask, 5 batches a second
    b = SourceRun(src, 2, restored=checkpoint(a))
    pull(b, 4)
    whole = SourceRun(src, 2)
    pull(whole, 7)
    assert key(a) + key(b) == key(whole)
    expected = live_activity.live_event_columns(np.arange(140, dtype=np.int64))
    assert key(whole) == list(zip(expected["user_id"].tolist(), expected["value"].tolist()))


# -- the runtime's own state files: snapshot, write, read back at another parallelism ---------------


def test_generator_positions_round_trip_through_checkpoint_state_files(tmp_path: Path) -> None:
    from runtime.core.keygroups import compute_key_group_range_for_operator_index
    from runtime.storage.state_files import read_operator_state, write_state_file

    n = 2000
    src = DataGeneratorSource(lambda i: i, n, batch_size=10)
    emitted: list[int] = []
    files = []
    run = SourceRun(src, 2)
    coordinator = run.coordinator.checkpoint_coordinator(5)
    for i in range(2):
        run.steps(i, 4 + i)
        emitted += run.values(i)
        snap = run.ops[i].snapshot_state(5)
        assert snap is not None  # a source always has its splits to snapshot
        h = write_state_file(str(tmp_path), 5, i, 0, 2, {"gen": snap})
        assert h is not None
        files.append(h.path)
    for new_p in (2, 3):
        dealt = [
            read_operator_state(str(tmp_path), files, "gen", compute_key_group_range_for_operator_index(128, new_p, j), j, new_p)
            .operator_lists.get(SPLITS_STATE, [])
            for j in range(new_p)
        ]
        rest = SourceRun(src, new_p, restored=SourceRunCheckpoint(coordinator, dealt)).run()
        assert_exactly_once(emitted + [v for j in range(new_p) for v in rest.values(j)], list(range(n)))


# -- windowed_sum --------------------------------------------------------------------------------


def test_windowed_sum_build_takes_rate_and_checkpoint_interval() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    windowed_sum.build(env, 1000, "/tmp/never-written", rate=5000, checkpoint_interval_ms=250)
    assert env.get_checkpoint_interval() == 250
    nodes = {n.name: n for n in env.get_stream_graph().nodes.values()}
    op = nodes["events"].operator_factory()
    assert op.source.rate_limiter_strategy.records_per_second == 5000
    plain = StreamExecutionEnvironment.get_execution_environment()
    windowed_sum.build(plain, 1000, "/tmp/never-written", True)  # the old positional call
    assert plain.get_checkpoint_interval() == -1
    assert {n.name: n for n in plain.get_stream_graph().nodes.values()}["events"].operator_factory().source.rate_limiter_strategy is None
