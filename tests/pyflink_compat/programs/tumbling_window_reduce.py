"""Tumbling event-time windows of 10 ms with a ReduceFunction: the sum per key and window."""

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ReduceFunction
from pyflink.datastream.window import TumblingEventTimeWindows


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class SumReduce(ReduceFunction):
    def reduce(self, a, b):
        return a[0], a[1] + b[1], max(a[2], b[2])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 1, 1), ("b", 2, 3), ("a", 3, 9), ("a", 4, 10), ("b", 5, 15), ("b", 6, 19), ("a", 7, 25), ("b", 8, 31)]
env.from_collection(
    data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()])
).assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())).key_by(
    lambda v: v[0]
).window(TumblingEventTimeWindows.of(Time.milliseconds(10))).reduce(SumReduce()).print()
env.execute("tumbling_window_reduce")
