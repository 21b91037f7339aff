"""connect with a CoMapFunction and a CoFlatMapFunction: two streams of different types."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import CoFlatMapFunction, CoMapFunction


class Describe(CoMapFunction):
    def map1(self, value):
        return "number %d" % value

    def map2(self, value):
        return "word %s" % value


class Explode(CoFlatMapFunction):
    def flat_map1(self, value):
        for i in range(value):
            yield "n%d.%d" % (value, i)

    def flat_map2(self, value):
        yield from value.split("-")


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
numbers = env.from_collection([1, 2, 3], type_info=Types.INT())
words = env.from_collection(["a-b", "c"], type_info=Types.STRING())
numbers.connect(words).map(Describe(), output_type=Types.STRING()).print()
numbers.connect(words).flat_map(Explode(), output_type=Types.STRING()).print()
env.execute("connect_co_map")
