"""A PyFlink-style program (only the imports say runtime.api instead of pyflink)."""
from runtime.api.common import Duration, WatermarkStrategy
from runtime.api.common.typeinfo import Types
from runtime.api.common.watermark_strategy import TimestampAssigner
from runtime.api.datastream import StreamExecutionEnvironment
from runtime.api.datastream.functions import KeyedProcessFunction, RuntimeContext
from runtime.api.datastream.state import ValueStateDescriptor


class RunningTotal(KeyedProcessFunction):
    def __init__(self):
        self.total = None

    def open(self, runtime_context: RuntimeContext):
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, value, ctx: 'KeyedProcessFunction.Context'):
        self.total.update((self.total.value() or 0) + value[2])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 1500)

    def on_timer(self, timestamp: int, ctx: 'KeyedProcessFunction.OnTimerContext'):
        yield ctx.get_current_key(), timestamp, self.total.value()


class OrderTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp: int) -> int:
        return int(value[0])


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    orders = env.from_collection(
        collection=[(500, 'pens', 3), (2500, 'ink', 1), (1200, 'pens', 2), (4000, 'ink', 4), (6000, 'pens', 1)])
    orders = orders.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1))
                         .with_timestamp_assigner(OrderTime()))
    orders.key_by(lambda order: order[1]) \
          .process(RunningTotal()) \
          .print()
    env.execute()


if __name__ == '__main__':
    main()
