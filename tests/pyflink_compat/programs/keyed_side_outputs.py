"""A KeyedProcessFunction with state and a side output: orders over a customer's limit are
rejected to a side output, the others pass with the running total."""

from pyflink.common import Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor

rejected = OutputTag("rejected", Types.TUPLE([Types.STRING(), Types.INT()]))
LIMIT = 100


class Limit(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.spent = runtime_context.get_state(ValueStateDescriptor("spent", Types.INT()))

    def process_element(self, value, ctx):
        spent = self.spent.value() or 0
        if spent + value[1] > LIMIT:
            yield rejected, value
        else:
            self.spent.update(spent + value[1])
            yield value[0], value[1], spent + value[1]


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
orders = [("ann", 30), ("bob", 90), ("ann", 50), ("bob", 20), ("ann", 30), ("ann", 20), ("bob", 10)]
accepted = (
    env.from_collection(orders, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
    .key_by(lambda v: v[0])
    .process(Limit(), output_type=Types.TUPLE([Types.STRING(), Types.INT(), Types.INT()]))
)
accepted.print()
accepted.get_side_output(rejected).map(lambda v: "rejected %s %d" % v, output_type=Types.STRING()).print()
env.execute("keyed_side_outputs")
