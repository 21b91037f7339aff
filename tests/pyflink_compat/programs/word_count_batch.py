"""The classic word count in BATCH mode: flat_map, map, key_by, reduce; one result per word."""

from pyflink.common import Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
lines = [
    "to be or not to be",
    "that is the question",
    "whether tis nobler in the mind to suffer",
    "the slings and arrows of outrageous fortune",
]


def split(line):
    yield from line.split()


env.from_collection(lines).flat_map(split).map(
    lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()])
).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print()
env.execute("word_count_batch")
