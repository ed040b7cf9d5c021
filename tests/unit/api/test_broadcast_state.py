"""The broadcast state pattern's operators: read-only on the element side, snapshot and restore at any parallelism."""
from __future__ import annotations

import pytest

from runtime.api.common import Types
from runtime.api.datastream import BroadcastProcessFunction, StreamExecutionEnvironment
from runtime.api.datastream.state import MapStateDescriptor
from runtime.api.execution import use_executor
from runtime.api.operators.broadcast import BROADCAST_STATE, BroadcastProcessOperator
from runtime.core.checkpoint import StateInitializationContext
from runtime.core.errors import InvalidProgramError
from tests.harness import CollectingOutput, make_context, obj
from tests.unit.api.local_runner import LocalExecutor

pytestmark = pytest.mark.unit

RATES = MapStateDescriptor("rates", Types.STRING(), Types.FLOAT())


class Convert(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        rate = ctx.get_broadcast_state(RATES).get(value[0])
        yield (value[0], value[1] * rate) if rate is not None else ("unknown", value)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RATES).put(value[0], value[1])
        yield f"rate {value[0]}"


class Meddle(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(RATES).put("x", 1)
        return []

    def process_broadcast_element(self, value, ctx):
        return []


def _operator(fn, subtask: int = 0, parallelism: int = 1, restored=None) -> tuple[BroadcastProcessOperator, CollectingOutput]:
    op = BroadcastProcessOperator(fn, [RATES])
    out = CollectingOutput()
    ctx = make_context(out, subtask=subtask, parallelism=parallelism)
    op.setup(ctx)
    op.initialize_state(restored or StateInitializationContext())
    op.open()
    return op, out


def rows(out: CollectingOutput) -> list:
    return [r for b in out.batches for r in b.rows()]


def test_the_element_side_reads_and_the_broadcast_side_writes() -> None:
    op, out = _operator(Convert())
    op.process_batch(obj([("eur", 2.0)]), 0)
    op.process_batch(obj([("eur", 1.5), ("usd", 1.0)]), 1)
    op.process_batch(obj([("eur", 2.0), ("gbp", 1.0)]), 0)
    assert rows(out) == [("unknown", ("eur", 2.0)), "rate eur", "rate usd", ("eur", 3.0), ("unknown", ("gbp", 1.0))]
    meddler, _ = _operator(Meddle())
    with pytest.raises(InvalidProgramError, match="read-only"):
        meddler.process_batch(obj([("eur", 1.0)]), 0)


@pytest.mark.parametrize("new_parallelism", [1, 3])
def test_broadcast_state_is_snapshotted_once_and_every_restored_subtask_gets_it(new_parallelism: int) -> None:
    subtasks = [_operator(Convert(), i, 2)[0] for i in range(2)]
    for op in subtasks:
        op.process_batch(obj([("eur", 1.5), ("usd", 1.0)]), 1)
    snaps = [op.snapshot_state(1) for op in subtasks]
    assert snaps[1].union_lists[BROADCAST_STATE] == []  # the copies are equal: subtask 0's is kept
    union = [item for s in snaps for item in s.union_lists[BROADCAST_STATE]]
    for i in range(new_parallelism):
        restored, out = _operator(Convert(), i, new_parallelism, StateInitializationContext(restored_checkpoint_id=1, union_lists={BROADCAST_STATE: union}))
        restored.process_batch(obj([("usd", 4.0)]), 0)
        assert rows(out) == [("usd", 4.0)]


def test_the_api_checks_descriptors_and_functions() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    events, rules = env.from_collection([1]), env.from_collection([("a", 1)])
    with pytest.raises(InvalidProgramError, match="MapStateDescriptor"):
        rules.broadcast("rates")
    with pytest.raises(InvalidProgramError, match="unique"):
        rules.broadcast(RATES, MapStateDescriptor("rates"))
    with pytest.raises(InvalidProgramError, match="BroadcastProcessFunction"):
        events.connect(rules.broadcast(RATES)).process(lambda v, c: [v])
    with pytest.raises(InvalidProgramError, match="KeyedBroadcastProcessFunction"):
        events.key_by(lambda v: v).connect(rules.broadcast(RATES)).process(Convert())
    assert not isinstance(rules.broadcast(), type(rules.broadcast(RATES)))  # without descriptors: a plain broadcast partitioning


def test_a_broadcast_process_function_through_the_local_executor() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    rates = env.from_collection([("eur", 2.0)]).broadcast(RATES)
    with use_executor(LocalExecutor()):
        got = list(env.from_collection([("eur", 3.0)]).connect(rates).process(Convert()).execute_and_collect())
    # the local executor runs the sources one after the other, the rates' (created first) first
    assert sorted(map(repr, got)) == sorted(map(repr, ["rate eur", ("eur", 6.0)]))
