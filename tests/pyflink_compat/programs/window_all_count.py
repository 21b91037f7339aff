"""Non-keyed windows: window_all with a CountTumblingWindowAssigner and a tumbling event-time window_all with a ProcessAllWindowFunction."""

from collections.abc import Iterable

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessAllWindowFunction
from pyflink.datastream.window import CountTumblingWindowAssigner, TimeWindow, TumblingEventTimeWindows


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value


class Summary(ProcessAllWindowFunction[int, tuple, TimeWindow]):
    def process(self, context: ProcessAllWindowFunction.Context, elements: Iterable[int]) -> Iterable[tuple]:
        values = list(elements)
        yield context.window().start, len(values), sum(values)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection([1, 2, 5, 11, 12, 13, 27, 31], type_info=Types.LONG())
ds.window_all(CountTumblingWindowAssigner.of(3)).reduce(lambda a, b: a + b).map(
    lambda v: "count window sum %d" % v
).print()
ds.assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())
).window_all(TumblingEventTimeWindows.of(Time.milliseconds(10))).process(Summary()).print()
env.execute("window_all_count")
