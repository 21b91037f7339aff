"""Keyed ListState: buffer each key's elements and emit them three at a time."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import ListStateDescriptor


class Batcher(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.buffer = runtime_context.get_list_state(ListStateDescriptor("buffer", Types.INT()))

    def process_element(self, value, ctx):
        self.buffer.add(value[1])
        items = list(self.buffer.get())
        if len(items) == 3:
            self.buffer.clear()
            yield ctx.get_current_key(), sorted(items)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("k%d" % (i % 2), i) for i in range(12)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
ds.key_by(lambda v: v[0]).process(Batcher()).print()
env.execute("list_state_batches")
