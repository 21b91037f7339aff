"""A WindowFunction with a late-data side output (data in timestamp order: the side output stays
empty whenever the watermarks come, so the output does not depend on timing)."""

from collections.abc import Iterable

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import WindowFunction
from pyflink.datastream.window import TimeWindow, TumblingEventTimeWindows


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


class CountPerWindow(WindowFunction[tuple, tuple, str, TimeWindow]):
    def apply(self, key: str, window: TimeWindow, inputs: Iterable[tuple]):
        return [(key, window.start, window.end, len(list(inputs)))]


late = OutputTag("late", Types.TUPLE([Types.STRING(), Types.LONG()]))
env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("k", 1), ("k", 3), ("k", 4), ("k", 11), ("j", 12), ("k", 15), ("j", 25), ("k", 26)]
windowed = (
    env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.LONG()]))
    .assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts()))
    .key_by(lambda v: v[0], key_type=Types.STRING())
    .window(TumblingEventTimeWindows.of(Time.milliseconds(10)))
    .side_output_late_data(late)
    .apply(CountPerWindow(), Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG(), Types.INT()]))
)
windowed.print()
windowed.get_side_output(late).map(lambda v: ("late", v[0], v[1])).print()
env.execute("window_apply_late_data")
