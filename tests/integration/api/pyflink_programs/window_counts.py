"""A PyFlink-style program (only the imports say runtime.api instead of pyflink)."""
from collections.abc import Iterable

from runtime.api.common import Time, Types, WatermarkStrategy
from runtime.api.common.watermark_strategy import TimestampAssigner
from runtime.api.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from runtime.api.datastream.window import TimeWindow, TumblingEventTimeWindows


class SecondField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return int(value[1])


class CountPerWindow(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self,
                key: str,
                context: ProcessWindowFunction.Context[TimeWindow],
                elements: Iterable[tuple]) -> Iterable[tuple]:
        return [(key, context.window().start, context.window().end, len(list(elements)))]


if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    data = env.from_collection([('a', 1), ('b', 2), ('a', 4), ('a', 6), ('b', 11), ('a', 12)],
                               type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    watermarks = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(SecondField())
    data.assign_timestamps_and_watermarks(watermarks) \
        .key_by(lambda x: x[0], key_type=Types.STRING()) \
        .window(TumblingEventTimeWindows.of(Time.milliseconds(5))) \
        .process(CountPerWindow(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT(), Types.INT()])) \
        .print()
    env.execute()
