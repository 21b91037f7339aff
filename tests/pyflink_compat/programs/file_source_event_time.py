"""A FileSource of CSV events, timestamps and watermarks from a WatermarkStrategy with a
TimestampAssigner, then an event-time tumbling window: the events per page every 100 ms."""

import argparse

from pyflink.common import Time, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import StreamExecutionEnvironment
from pyflink.datastream.connectors.file_system import FileSource, StreamFormat
from pyflink.datastream.window import TumblingEventTimeWindows


class CsvTimestamp(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return int(value.split(",")[0])


parser = argparse.ArgumentParser()
parser.add_argument("--input", required=True)
args = parser.parse_args()

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(1)
source = (
    FileSource.for_record_stream_format(StreamFormat.text_line_format(), args.input).process_static_file_set().build()
)
strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(CsvTimestamp())
# PyFlink 2.3 leaves records of a source without timestamps when from_source is given a Python
# TimestampAssigner ("Record has Java Long.MIN_VALUE timestamp"): assign them after the source
env.from_source(source, WatermarkStrategy.no_watermarks(), "events").assign_timestamps_and_watermarks(strategy).map(
    lambda line: (line.split(",")[1], 1), output_type=Types.TUPLE([Types.STRING(), Types.INT()])
).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(Time.milliseconds(100))).reduce(
    lambda a, b: (a[0], a[1] + b[1])
).print()
env.execute("file_source_event_time")
