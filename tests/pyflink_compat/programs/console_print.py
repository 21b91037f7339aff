"""print() in a user function and ds.print() at parallelism 2 (the console test's program):
print() lines as they are, the print sink's lines prefixed with the subtask ('1> ', '2> ').
Its logging.basicConfig(level=INFO) must not bring the client's HTTP request lines."""

import logging

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment

logging.basicConfig(level=logging.INFO)


def tag(x):
    print("in map %d" % x)
    return x * 10


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.from_collection([1, 2, 3, 4], type_info=Types.INT()).map(tag, output_type=Types.INT()).print()
env.execute("console_print")
print("after execute")
