"""Function classes with open(): a MapFunction and a FlatMapFunction reading their RuntimeContext
and loading a lookup table once, and a FilterFunction."""

from pyflink.common import Types
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.functions import FilterFunction, FlatMapFunction, MapFunction, RuntimeContext


class Enrich(MapFunction):
    def open(self, runtime_context: RuntimeContext):
        self.names = {1: "one", 2: "two", 3: "three"}
        self.parallelism = runtime_context.get_number_of_parallel_subtasks()

    def map(self, value):
        return value, self.names.get(value, "many"), self.parallelism


class Repeat(FlatMapFunction):
    def flat_map(self, value):
        for _ in range(min(value[0], 2)):
            yield "%s/%d" % (value[1], value[2])


class NotMany(FilterFunction):
    def filter(self, value):
        return not value.startswith("many")


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
env.from_collection([1, 2, 3, 4], type_info=Types.INT()).map(
    Enrich(), output_type=Types.TUPLE([Types.INT(), Types.STRING(), Types.INT()])
).flat_map(Repeat(), output_type=Types.STRING()).filter(NotMany()).print()
env.execute("rich_functions_open")
