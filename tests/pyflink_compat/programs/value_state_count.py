"""Keyed ValueState: a running count and sum per key (KeyedProcessFunction)."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class CountAndSum(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.INT()))
        self.total = runtime_context.get_state(ValueStateDescriptor("total", Types.LONG()))

    def process_element(self, value, ctx):
        count = (self.count.value() or 0) + 1
        total = (self.total.value() or 0) + value[1]
        self.count.update(count)
        self.total.update(total)
        yield ctx.get_current_key(), count, total


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
ds = env.from_collection(
    [("a", 1), ("b", 10), ("a", 2), ("c", 100), ("b", 20), ("a", 3), ("c", 200), ("b", 30)],
    type_info=Types.TUPLE([Types.STRING(), Types.LONG()]),
)
ds.key_by(lambda v: v[0]).process(CountAndSum()).print()
env.execute("value_state_count")
