"""NumberSequenceSource through from_source: squares of 1..20, filtered and summed per remainder."""

from pyflink.common import Types, WatermarkStrategy
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.number_seq import NumberSequenceSource

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
env.from_source(NumberSequenceSource(1, 20), WatermarkStrategy.no_watermarks(), "numbers").map(
    lambda n: (n % 3, n * n), output_type=Types.TUPLE([Types.LONG(), Types.LONG()])
).filter(lambda v: v[1] % 2 == 0).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).print()
env.execute("number_sequence_source")
