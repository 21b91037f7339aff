"""Deleting a timer: an alert fires 10 ms after 'open' unless a 'close' for the key came first."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class Alert(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer", Types.LONG()))

    def process_element(self, value, ctx):
        if value[1] == "open":
            t = ctx.timestamp() + 10
            ctx.timer_service().register_event_time_timer(t)
            self.timer.update(t)
        elif self.timer.value() is not None and ctx.timestamp() < self.timer.value():
            ctx.timer_service().delete_event_time_timer(self.timer.value())
            self.timer.clear()
            yield "closed in time", ctx.get_current_key()

    def on_timer(self, timestamp, ctx):
        self.timer.clear()
        yield "alert", ctx.get_current_key(), timestamp


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [
    ("t1", "open", 0),
    ("t2", "open", 2),
    ("t1", "close", 5),
    ("t3", "open", 6),
    ("t3", "close", 14),
    ("t2", "close", 15),
    ("t4", "open", 20),
]
env.from_collection(
    data, type_info=Types.TUPLE([Types.STRING(), Types.STRING(), Types.LONG()])
).assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts())).key_by(
    lambda v: v[0]
).process(Alert()).print()
env.execute("timer_delete")
