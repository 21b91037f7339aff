"""``pyflink.datastream.connectors.kinesis``: refused (Kinesis is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

KinesisStreamsSink = refused("KinesisStreamsSink", "Kinesis")
KinesisFirehoseSink = refused("KinesisFirehoseSink", "Kinesis")
FlinkKinesisConsumer = refused("FlinkKinesisConsumer", "Kinesis")
KinesisStreamsSinkBuilder = refused("KinesisStreamsSinkBuilder", "Kinesis")

__all__ = [
    "KinesisStreamsSink",
    "KinesisFirehoseSink",
    "FlinkKinesisConsumer",
    "KinesisStreamsSinkBuilder",
]
