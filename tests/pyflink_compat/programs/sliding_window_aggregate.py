"""Sliding event-time windows (size 10 ms, slide 5 ms) with an AggregateFunction: min, max, count."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction
from pyflink.datastream.window import SlidingEventTimeWindows


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class MinMaxCount(AggregateFunction):
    def create_accumulator(self):
        return None, None, 0

    def add(self, value, acc):
        lo, hi, n = acc
        v = value[1]
        return (v if lo is None else min(lo, v)), (v if hi is None else max(hi, v)), n + 1

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return min(a[0], b[0]), max(a[1], b[1]), a[2] + b[2]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("s", 4, 1), ("s", 8, 4), ("s", 1, 7), ("s", 6, 12), ("s", 3, 14), ("s", 9, 21)]
env.from_collection(
    data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
).assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())).key_by(
    lambda v: v[0]
).window(SlidingEventTimeWindows.of(Time.milliseconds(10), Time.milliseconds(5))).aggregate(
    MinMaxCount(), accumulator_type=Types.PICKLED_BYTE_ARRAY(), output_type=Types.PICKLED_BYTE_ARRAY()
).print()
env.execute("sliding_window_aggregate")
