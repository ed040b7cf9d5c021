"""A PyFlink-style program (only the imports say runtime.api instead of pyflink): side outputs.

Late data is not in here: with PyFlink's periodic watermarks which elements are late depends on
timing; tests/integration/api/test_side_outputs.py checks it with one element per batch."""
from collections.abc import Iterable

from runtime.api.common import Duration, Time, Types, WatermarkStrategy
from runtime.api.common.watermark_strategy import TimestampAssigner
from runtime.api.datastream import OutputTag, ProcessFunction, ProcessWindowFunction, StreamExecutionEnvironment
from runtime.api.datastream.window import TimeWindow, TumblingEventTimeWindows

negative = OutputTag("negative", Types.TUPLE([Types.STRING(), Types.INT()]))
big = OutputTag("big", Types.TUPLE([Types.STRING(), Types.INT()]))


class SplitNegatives(ProcessFunction):
    def process_element(self, value, ctx: ProcessFunction.Context):
        if value[1] < 0:
            yield negative, value          # PyFlink's way
        else:
            yield value
            if value[1] > 29:
                ctx.output(big, value)     # Flink's Java way


class Sum(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self, key: str, context: ProcessWindowFunction.Context[TimeWindow], elements: Iterable[tuple]) -> Iterable[tuple]:
        return [(key, context.window().start, sum(e[1] for e in elements))]


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return abs(value[1])


if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    data = env.from_collection(
        [('a', 1), ('b', 2), ('a', -3), ('a', 12), ('b', 14), ('a', 4), ('b', -15), ('a', 30), ('b', 8), ('a', 31)],
        type_info=Types.TUPLE([Types.STRING(), Types.INT()])).set_parallelism(1)
    watermarks = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(Ts())
    split = data.assign_timestamps_and_watermarks(watermarks).process(SplitNegatives(), output_type=data.get_type())
    windows = split.key_by(lambda x: x[0], key_type=Types.STRING()) \
        .window(TumblingEventTimeWindows.of(Time.milliseconds(10))) \
        .process(Sum(), Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()]))
    windows.map(lambda t: f"window {t}", Types.STRING()).print()
    split.get_side_output(negative).map(lambda t: f"negative {t}", Types.STRING()).print()
    split.get_side_output(big).map(lambda t: f"big {t}", Types.STRING()).set_parallelism(1).print()
    env.execute("side outputs")
