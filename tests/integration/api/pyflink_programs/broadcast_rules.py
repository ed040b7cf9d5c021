"""A PyFlink-style program (only the imports say runtime.api instead of pyflink): rules broadcast to a
keyed stream of orders; an order above its item's limit raises an alert (the broadcast state pattern)."""
from runtime.api.common import Types, WatermarkStrategy
from runtime.api.common.watermark_strategy import TimestampAssigner
from runtime.api.datastream import KeyedBroadcastProcessFunction, RuntimeContext, StreamExecutionEnvironment
from runtime.api.datastream.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

RULES = MapStateDescriptor("rules", Types.STRING(), Types.INT())
PENDING = ListStateDescriptor("pending", Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()]))


def check(order, limit):
    return [f"alert {order[0]} order {order[2]}: {order[1]} > {limit}"] if order[1] > limit else []


class ApplyRules(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.pending = runtime_context.get_list_state(PENDING)
        self.checked = runtime_context.get_state(ValueStateDescriptor("checked", Types.INT()))

    def process_element(self, order, ctx: KeyedBroadcastProcessFunction.ReadOnlyContext):
        self.checked.update((self.checked.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(1_000_000)
        limit = ctx.get_broadcast_state(RULES).get(order[0])
        if limit is None:
            self.pending.add(order)   # its rule has not arrived yet
            return
        yield from check(order, limit)

    def process_broadcast_element(self, rule, ctx: KeyedBroadcastProcessFunction.Context):
        ctx.get_broadcast_state(RULES).put(rule[0], rule[1])
        waiting = []

        def take(key, state):
            if key == rule[0]:
                waiting.extend(state.get())
                state.clear()

        ctx.apply_to_keyed_state(PENDING, take)
        for order in waiting:
            yield from check(order, rule[1])

    def on_timer(self, timestamp, ctx: KeyedBroadcastProcessFunction.OnTimerContext):
        rules = ctx.get_broadcast_state(RULES)
        yield f"checked {ctx.get_current_key()} {self.checked.value()} limit {rules.get(ctx.get_current_key())}"


class OrderNumber(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[2]


if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    orders = env.from_collection(
        [("pens", 3, 1), ("ink", 12, 2), ("pens", 9, 3), ("paper", 500, 4), ("ink", 4, 5), ("pens", 6, 6)],
        type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])) \
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(OrderNumber()))
    rules = env.from_collection([("pens", 5), ("ink", 10), ("paper", 100)],
                                type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    orders.key_by(lambda o: o[0], key_type=Types.STRING()) \
        .connect(rules.broadcast(RULES)) \
        .process(ApplyRules(), Types.STRING()) \
        .print()
    env.execute("broadcast rules")
