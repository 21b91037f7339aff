"""Broadcast state: a rules stream broadcast to every subtask, applied to a keyed stream
(KeyedBroadcastProcessFunction). Flink does not order the two inputs, so the events wait in keyed
state for an event-time timer, which fires once both inputs ended (the watermark of a two-input
operator is the smaller of the two): by then the rules are in."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedBroadcastProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor

rules_desc = MapStateDescriptor("rules", Types.STRING(), Types.INT())


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class ApplyRules(KeyedBroadcastProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending", Types.INT()))

    def process_element(self, value, ctx):
        self.pending.add(value[1])
        ctx.timer_service().register_event_time_timer(1000)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(rules_desc).put(value[0], value[1])

    def on_timer(self, timestamp, ctx):
        threshold = ctx.get_broadcast_state(rules_desc).get("threshold")
        for v in self.pending.get():
            if v >= threshold:
                yield "alert", ctx.get_current_key(), v


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
rules = env.from_collection([("threshold", 50)], type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
events = env.from_collection(
    [("s1", 10, 1), ("s2", 70, 2), ("s1", 55, 3), ("s3", 50, 4), ("s2", 20, 5)],
    type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]),
).assign_timestamps_and_watermarks(WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(Ts()))
events.key_by(lambda v: v[0]).connect(rules.broadcast(rules_desc)).process(
    ApplyRules(), output_type=Types.TUPLE([Types.STRING(), Types.STRING(), Types.INT()])
).print()
env.execute("broadcast_state_rules")
