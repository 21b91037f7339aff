"""Keyed AggregatingState with an AggregateFunction: a running average per key."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction, KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import AggregatingStateDescriptor


class Average(AggregateFunction):
    def create_accumulator(self):
        return 0, 0

    def add(self, value, accumulator):
        return accumulator[0] + value, accumulator[1] + 1

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, a, b):
        return a[0] + b[0], a[1] + b[1]


class RunningAverage(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.avg = runtime_context.get_aggregating_state(
            AggregatingStateDescriptor("avg", Average(), Types.TUPLE([Types.LONG(), Types.LONG()]))
        )

    def process_element(self, value, ctx):
        self.avg.add(value[1])
        yield value[0], round(self.avg.get(), 3)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("x", 1), ("y", 10), ("x", 2), ("x", 6), ("y", 20), ("y", 33)]
env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()])).key_by(lambda v: v[0]).process(
    RunningAverage()
).print()
env.execute("aggregating_state_avg")
