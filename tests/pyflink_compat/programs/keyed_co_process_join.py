"""Two keyed streams connected with a KeyedCoProcessFunction: orders joined with their payments
in keyed state, whichever comes first."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedCoProcessFunction, RuntimeContext
from pyflink.datastream.state import ValueStateDescriptor


class Join(KeyedCoProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.order = runtime_context.get_state(ValueStateDescriptor("order", Types.STRING()))
        self.paid = runtime_context.get_state(ValueStateDescriptor("paid", Types.INT()))

    def process_element1(self, value, ctx):
        if self.paid.value() is not None:
            yield value[0], value[1], self.paid.value()
        else:
            self.order.update(value[1])

    def process_element2(self, value, ctx):
        if self.order.value() is not None:
            yield value[0], self.order.value(), value[1]
        else:
            self.paid.update(value[1])


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
orders = env.from_collection(
    [(1, "book"), (2, "pen"), (3, "lamp"), (4, "desk")], type_info=Types.TUPLE([Types.INT(), Types.STRING()])
)
payments = env.from_collection([(3, 40), (1, 12), (4, 150), (5, 9)], type_info=Types.TUPLE([Types.INT(), Types.INT()]))
orders.key_by(lambda v: v[0], key_type=Types.INT()).connect(
    payments.key_by(lambda v: v[0], key_type=Types.INT())
).process(Join(), output_type=Types.TUPLE([Types.INT(), Types.STRING(), Types.INT()])).print()
env.execute("keyed_co_process_join")
