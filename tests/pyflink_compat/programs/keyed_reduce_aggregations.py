"""Keyed rolling aggregations: reduce, sum, min, max, min_by and max_by."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
data = [("a", 3, "x"), ("b", 5, "y"), ("a", 1, "z"), ("b", 8, "w"), ("a", 7, "v"), ("b", 2, "u")]
ds = env.from_collection(data, type_info=Types.TUPLE([Types.STRING(), Types.INT(), Types.STRING()]))
keyed = ds.key_by(lambda v: v[0])
keyed.reduce(lambda a, b: (a[0], a[1] + b[1], a[2] + b[2])).map(lambda v: ("reduce",) + v).print()
keyed.sum(1).map(lambda v: ("sum",) + v).print()
keyed.min(1).map(lambda v: ("min", v[0], v[1])).print()
keyed.max(1).map(lambda v: ("max", v[0], v[1])).print()
keyed.min_by(1).map(lambda v: ("min_by",) + v).print()
keyed.max_by(1).map(lambda v: ("max_by",) + v).print()
env.execute("keyed_reduce_aggregations")
