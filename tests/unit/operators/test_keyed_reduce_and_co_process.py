from __future__ import annotations

import random

import pytest

from runtime.api.datastream.functions import KeyedCoProcessFunction, ReduceFunction
from runtime.api.datastream.state import ListStateDescriptor, ValueStateDescriptor
from runtime.api.operators.co_process import KeyedCoProcessOperator
from runtime.api.operators.keyed_reduce import KeyedReduceOperator
from runtime.core.records import Watermark
from tests.harness import Harness

pytestmark = pytest.mark.unit


class SumReduce(ReduceFunction):
    def reduce(self, a, b):
        return (a[0], a[1] + b[1])


@pytest.mark.parametrize("fn", [SumReduce(), lambda a, b: (a[0], a[1] + b[1])])
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_keyed_reduce_running_results(fn, backend):
    rnd = random.Random(7)
    data = [(rnd.choice("abcde"), rnd.randint(0, 9)) for _ in range(200)]
    h = Harness(KeyedReduceOperator(lambda r: r[0], fn), backend=backend)
    for i in range(0, 200, 50):
        h.process(data[i : i + 50], range(i, i + 50))
    running: dict[str, int] = {}
    expected = []
    for k, v in data:
        running[k] = running.get(k, 0) + v
        expected.append((k, running[k]))
    assert h.output.values() == expected
    assert [t for _, t in h.output.records_with_timestamps()] == list(range(200))  # timestamps kept
    assert len(h.output.batches) == 4
    h.close()


class Join(KeyedCoProcessFunction):
    """Buffer orders until the payment with the same id arrives (and vice versa)."""

    def open(self, runtime_context):
        self.orders = runtime_context.get_list_state(ListStateDescriptor("orders"))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid"))

    def process_element1(self, value, ctx):
        if self.paid.value() is not None:
            yield ("joined", ctx.get_current_key(), value[1], self.paid.value())
        else:
            self.orders.add(value[1])
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 100)

    def process_element2(self, value, ctx):
        self.paid.update(value["amount"])
        for o in self.orders.get():
            yield ("joined", ctx.get_current_key(), o, value["amount"])
        self.orders.clear()

    def on_timer(self, timestamp, ctx):
        for o in self.orders.get():
            yield ("timeout", ctx.get_current_key(), o)
        self.orders.clear()


def test_keyed_co_process():
    op = KeyedCoProcessOperator(lambda o: o[0], lambda p: p["id"], Join())
    assert op.num_inputs == 2
    h = Harness(op)
    h.process([(1, "o1"), (2, "o2"), (3, "o3")], [10, 20, 30], input_index=0)
    h.process([{"id": 2, "amount": 5}], [40], input_index=1)
    h.process([(2, "o2b")], [50], input_index=0)
    assert h.output.values() == [("joined", 2, "o2", 5), ("joined", 2, "o2b", 5)]
    h.output.clear()
    h.watermark(500, input_index=0)
    assert h.output.events == []  # the combined watermark waits for input 1
    h.watermark(115, input_index=1)
    assert h.output.records_with_timestamps() == [(("timeout", 1, "o1"), 110)]
    assert h.output.events[-1] == Watermark(115)
    h.watermark(1000, input_index=1)
    assert h.output.values()[-1] == ("timeout", 3, "o3")


@pytest.mark.parametrize("keys", ["ab", [1, 2]])
def test_a_reduce_function_with_its_own_keyed_state_sees_each_records_key(keys) -> None:
    """Int keys take the batch path (key groups computed at once): the backend's current key must
    still be the record's for state the reduce function keeps itself."""
    from runtime.api.datastream.functions import ReduceFunction
    from runtime.api.datastream.state import ValueStateDescriptor
    from runtime.api.operators.keyed_reduce import KeyedReduceOperator
    from tests.harness import Harness

    class CountingReduce(ReduceFunction):
        def open(self, rc):
            self.n = rc.get_state(ValueStateDescriptor("n"))

        def reduce(self, a, b):
            self.n.update((self.n.value() or 1) + 1)  # records of this key reduced so far
            return (a[0], a[1] + b[1], self.n.value())

    h = Harness(KeyedReduceOperator(lambda r: r[0], CountingReduce()))
    a, b = keys[0], keys[1]
    h.process([(a, 1), (b, 1), (a, 1), (b, 1), (a, 1)], list(range(5)))
    assert h.output.values() == [(a, 1), (b, 1), (a, 2, 2), (b, 2, 2), (a, 3, 3)]
