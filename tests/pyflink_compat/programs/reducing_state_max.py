"""Keyed ReducingState: the maximum reading per sensor so far."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ReducingStateDescriptor


class RunningMax(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.max = runtime_context.get_reducing_state(
            ReducingStateDescriptor("max", lambda a, b: max(a, b), Types.INT())
        )

    def process_element(self, value, ctx):
        self.max.add(value[1])
        yield value[0], value[1], self.max.get()


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
readings = [("s1", 5), ("s2", 7), ("s1", 3), ("s1", 9), ("s2", 4), ("s2", 11), ("s1", 8)]
env.from_collection(readings, type_info=Types.TUPLE([Types.STRING(), Types.INT()])).key_by(lambda v: v[0]).process(
    RunningMax()
).print()
env.execute("reducing_state_max")
