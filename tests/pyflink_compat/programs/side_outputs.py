"""A ProcessFunction splitting a stream with OutputTags: evens to the main output, odds and
negatives to two side outputs."""

from pyflink.common import Types
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import ProcessFunction

odd = OutputTag("odd", Types.INT())
negative = OutputTag("negative", Types.STRING())


class Split(ProcessFunction):
    def process_element(self, value, ctx):
        if value < 0:
            yield negative, "negative %d" % value
        elif value % 2:
            yield odd, value
        else:
            yield value * 100


env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
main = env.from_collection([4, -1, 7, 10, 3, -8, 0, 5], type_info=Types.INT()).process(Split(), output_type=Types.INT())
main.map(lambda v: "even %d" % v, output_type=Types.STRING()).print()
main.get_side_output(odd).map(lambda v: "odd %d" % v, output_type=Types.STRING()).print()
main.get_side_output(negative).print()
env.execute("side_outputs")
