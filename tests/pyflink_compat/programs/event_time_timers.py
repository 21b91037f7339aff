"""Event-time timers: 5 ms after each element, emit the key's sum of everything up to the timer if
no newer element of the key came in between (a per-key inactivity timeout)."""

from pyflink.common import Duration, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Timeout(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.values = runtime_context.get_map_state(MapStateDescriptor("values", Types.LONG(), Types.LONG()))

    def process_element(self, value, ctx):
        self.values.put(ctx.timestamp(), value[1])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)

    def on_timer(self, timestamp, ctx):
        # the watermark passed the timer: every element up to it is here (later ones may be too)
        upto = sorted(ts for ts in self.values.keys() if ts <= timestamp)
        if upto and upto[-1] == timestamp - 5:
            yield ctx.get_current_key(), timestamp, sum(self.values.get(ts) for ts in upto)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 1, 1), ("b", 2, 2), ("a", 3, 3), ("a", 4, 12), ("b", 5, 13), ("b", 6, 14), ("a", 7, 30)]
env.from_collection(
    data, type_info=Types.TUPLE([Types.STRING(), Types.LONG(), Types.LONG()])
).assign_timestamps_and_watermarks(
    WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(1)).with_timestamp_assigner(Ts())
).key_by(lambda v: v[0]).process(Timeout()).print()
env.execute("event_time_timers")
