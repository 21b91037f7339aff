"""union: three streams of the same type, merged and summed per key (BATCH: one final sum; in
STREAMING the running sums would depend on how the three sources interleave)."""

from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(1)
t = Types.TUPLE([Types.STRING(), Types.INT()])
web = env.from_collection([("web", 1), ("web", 2)], type_info=t)
app = env.from_collection([("app", 3), ("app", 4), ("app", 5)], type_info=t)
shop = env.from_collection([("shop", 6)], type_info=t)
web.union(app, shop).map(lambda v: ("all", v[1]), output_type=t).key_by(lambda v: v[0]).reduce(
    lambda a, b: (a[0], a[1] + b[1])
).print()
env.execute("union_streams")
