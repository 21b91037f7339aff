"""aggregate with a ProcessWindowFunction: the incremental average and the window it belongs to."""

from collections.abc import Iterable

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction, ProcessWindowFunction
from pyflink.datastream.window import TimeWindow, TumblingEventTimeWindows


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Avg(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, acc):
        return acc[0] + value[1], acc[1] + 1

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class WithWindow(ProcessWindowFunction[float, tuple, str, TimeWindow]):
    def process(self, key, context, averages: Iterable[float]):
        yield key, context.window().start, context.window().end, next(iter(averages))


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 2, 0), ("b", 3, 1), ("a", 4, 5), ("b", 9, 12), ("a", 10, 14), ("a", 20, 18), ("b", 1, 21)]
env.from_collection(
    data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
).assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())).key_by(
    lambda v: v[0], key_type=Types.STRING()
).window(TumblingEventTimeWindows.of(Time.milliseconds(10))).aggregate(
    Avg(),
    WithWindow(),
    accumulator_type=Types.TUPLE([Types.LONG(), Types.LONG()]),
    output_type=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.DOUBLE()]),
).print()
env.execute("window_aggregate_with_process")
