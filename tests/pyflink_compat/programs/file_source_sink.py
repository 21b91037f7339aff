"""FileSource (text lines) to FileSink (row format): upper-cased lines with their length."""

import argparse

from pyflink.common import Encoder, Types, WatermarkStrategy
from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSink, FileSource, StreamFormat

parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
parser.add_argument("--output", required=True)
args = parser.parse_args()

env = StreamExecutionEnvironment.get_execution_environment()
env.set_runtime_mode(RuntimeExecutionMode.BATCH)
env.set_parallelism(1)
source = (
    FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.input).process_static_file_set().build()
)
env.from_source(source, WatermarkStrategy.no_watermarks(), "lines").filter(lambda line: line.strip() != "").map(
    lambda line: "%s|%d" % (line.upper(), len(line)), output_type=Types.STRING()
).sink_to(FileSink.for_row_format(args.output, Encoder.simple_string_encoder()).build())
env.execute("file_source_sink")
