"""A PyFlink-style program (only the imports say runtime.api instead of pyflink): tumbling, sliding,
session (with a dynamic gap) and count windows, each with a ProcessWindowFunction."""
from collections.abc import Iterable

from runtime.api.common import Time, Types, WatermarkStrategy
from runtime.api.common.watermark_strategy import TimestampAssigner
from runtime.api.datastream import ProcessWindowFunction, StreamExecutionEnvironment
from runtime.api.datastream.window import EventTimeSessionWindows, SessionWindowTimeGapExtractor, SlidingEventTimeWindows, TimeWindow, TumblingEventTimeWindows

EVENTS = [("a", 1, 3), ("b", 2, 1), ("a", 4, 2), ("a", 9, 5), ("b", 11, 4), ("a", 12, 1), ("b", 13, 2),
          ("a", 30, 6), ("b", 31, 3), ("a", 33, 2), ("b", 50, 7), ("a", 58, 1)]


class Describe(ProcessWindowFunction):
    def __init__(self, kind):
        self.kind = kind

    def process(self, key, context: ProcessWindowFunction.Context, elements: Iterable[tuple]) -> Iterable[str]:
        w = context.window()
        span = f"[{w.start},{w.end})" if isinstance(w, TimeWindow) else "count"
        values = [e[2] for e in elements]
        yield f"{self.kind} {key} {span} n={len(values)} sum={sum(values)}"


class GapPerKey(SessionWindowTimeGapExtractor):
    def extract(self, element) -> int:
        return 5 if element[0] == "a" else 10


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp) -> int:
        return value[1]


if __name__ == '__main__':
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    data = env.from_collection(EVENTS, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()])) \
        .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())) \
        .set_parallelism(1)  # with the (non-parallel) collection: the elements stay in order
    keyed = data.key_by(lambda e: e[0], key_type=Types.STRING())
    keyed.window(TumblingEventTimeWindows.of(Time.milliseconds(10))).process(Describe("tumbling"), Types.STRING()).print()
    keyed.window(SlidingEventTimeWindows.of(Time.milliseconds(20), Time.milliseconds(10))).process(Describe("sliding"), Types.STRING()).print()
    keyed.window(EventTimeSessionWindows.with_dynamic_gap(GapPerKey())).process(Describe("session"), Types.STRING()).print()
    keyed.count_window(2).process(Describe("count"), Types.STRING()).print()
    env.execute("window kinds")
