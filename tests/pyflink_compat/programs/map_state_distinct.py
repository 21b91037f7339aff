"""Keyed MapState: count distinct visitors per page and how often each came."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import KeyedProcessFunction, RuntimeContext
from pyflink.datastream.state import MapStateDescriptor


class Distinct(KeyedProcessFunction):
    def open(self, runtime_context: RuntimeContext):
        self.visits = runtime_context.get_map_state(MapStateDescriptor("visits", Types.STRING(), Types.INT()))

    def process_element(self, value, ctx):
        page, user = value
        seen = self.visits.get(user) if self.visits.contains(user) else 0
        self.visits.put(user, seen + 1)
        users = sorted(self.visits.keys())
        yield page, len(users), ",".join("%s:%d" % (u, self.visits.get(u)) for u in users)


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
clicks = [("/home", "ann"), ("/cart", "bob"), ("/home", "bob"), ("/home", "ann"), ("/cart", "cid"), ("/home", "dan")]
env.from_collection(clicks, type_info=Types.TUPLE([Types.STRING(), Types.STRING()])).key_by(lambda v: v[0]).process(
    Distinct()
).print()
env.execute("map_state_distinct")
