"""A PyFlink-style program (only the imports say runtime.api instead of pyflink): a keyed count whose
state expires 2 s after its last write, and an event-time timer per key reading it at the end."""
import time

from runtime.api.common import Time, Types, WatermarkStrategy
from runtime.api.common.watermark_strategy import TimestampAssigner
from runtime.api.datastream import KeyedProcessFunction, RuntimeContext, StreamExecutionEnvironment
from runtime.api.datastream.state import StateTtlConfig, ValueStateDescriptor


class CountWithTtl(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        ttl_config = StateTtlConfig \
            .new_builder(Time.seconds(2)) \
            .set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite) \
            .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired) \
            .build()
        descriptor = ValueStateDescriptor("count", Types.LONG())
        descriptor.enable_time_to_live(ttl_config)
        self.count = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx: 'KeyedProcessFunction.Context'):
        if value[0] == 'pause':
            time.sleep(4)  # every count written before this has expired after it
        current = (self.count.value() or 0) + 1
        self.count.update(current)
        ctx.timer_service().register_event_time_timer(10_000)
        yield f"count {value[0]} {current}"

    def on_timer(self, timestamp: int, ctx: 'KeyedProcessFunction.OnTimerContext'):
        yield f"timer {ctx.get_current_key()} {self.count.value() or 0}"


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[1]


if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    data = env.from_collection(
        [('a', 1), ('b', 2), ('a', 3), ('pause', 4), ('a', 5), ('a', 6)],
        type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    data.assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())) \
        .key_by(lambda x: x[0], key_type=Types.STRING()) \
        .process(CountWithTtl(), Types.STRING()) \
        .print()
    env.execute("ttl counts")
