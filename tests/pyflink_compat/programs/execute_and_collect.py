"""execute_and_collect as a closeable iterator: the program prints what it collects."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
ds = env.from_collection(
    [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5)], type_info=Types.TUPLE([Types.STRING(), Types.INT()])
)
with ds.map(
    lambda v: (v[0], v[1] * 10), output_type=Types.TUPLE([Types.STRING(), Types.INT()])
).execute_and_collect() as results:
    collected = sorted(results)
for r in collected:
    print("collected", r)
print("total", sum(v for _, v in collected))
