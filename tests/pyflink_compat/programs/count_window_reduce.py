"""Tumbling and sliding count windows: sums of every 3 elements per key, and of the last 3 every 2."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", i) for i in range(1, 8)] + [("b", i * 10) for i in range(1, 6)]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
keyed = ds.key_by(lambda v: v[0], key_type=Types.STRING())
keyed.count_window(3).reduce(lambda a, b: (a[0], a[1] + b[1])).map(lambda v: ("tumbling",) + v).print()
keyed.count_window(3, 2).reduce(lambda a, b: (a[0], a[1] + b[1])).map(lambda v: ("sliding",) + v).print()
env.execute("count_window_reduce")
