"""FileSink with an OutputFileConfig and a rolling policy: word counts as text lines."""

import argparse

from pyflink.common import Encoder, Types
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink, OutputFileConfig, RollingPolicy

parser = argparse.ArgumentParser()
parser.add_argument("--output", required=True)
args = parser.parse_args()

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(2)
text = ["the quick brown fox", "jumps over the lazy dog", "the dog sleeps", "a fox runs"]
env.from_collection(text, type_info=Types.STRING()).flat_map(lambda line: line.split(), output_type=Types.STRING()).map(
    lambda w: (w, 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()])
).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).map(
    lambda v: "%s=%d" % v, output_type=Types.STRING()
).sink_to(
    FileSink.for_row_format(args.output, Encoder.simple_string_encoder())
    .with_output_file_config(OutputFileConfig.builder().with_part_prefix("counts").with_part_suffix(".txt").build())
    .with_rolling_policy(RollingPolicy.default_rolling_policy())
    .build()
)
env.execute("file_sink_output_config")
