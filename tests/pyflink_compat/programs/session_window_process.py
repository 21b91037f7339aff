"""Event-time session windows (gap 5 ms) with a ProcessWindowFunction: each session's bounds and size."""

from collections.abc import Iterable

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessWindowFunction
from pyflink.datastream.window import EventTimeSessionWindows, TimeWindow


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class Describe(ProcessWindowFunction[tuple, tuple, str, TimeWindow]):
    def process(self, key: str, context: ProcessWindowFunction.Context, elements: Iterable[tuple]) -> Iterable[tuple]:
        stamps = [e[1] for e in elements]
        yield key, context.window().start, context.window().end, len(stamps), min(stamps), max(stamps)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
clicks = [("ann", 1), ("ann", 3), ("bob", 4), ("ann", 6), ("bob", 12), ("bob", 14), ("ann", 20), ("ann", 22)]
env.from_collection(clicks, type_info=Types.TUPLE([Types.STRING(), Types.LONG()])).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())
).key_by(lambda v: v[0], key_type=Types.STRING()).window(
    EventTimeSessionWindows.with_gap(Time.milliseconds(5))
).process(
    Describe(), Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.INT(), Types.LONG(), Types.LONG()])
).print()
env.execute("session_window_process")
