"""``pyflink.datastream.connectors`` on yarnflink: files and number sequences; the Java
connectors (Kafka, Pulsar, Elasticsearch, JDBC, Kinesis, RabbitMQ, Cassandra) import but refuse
any use with ``UnsupportedFeatureError`` (see docs/PYFLINK.md)."""

from pyflink.datastream.connectors.base import DeliveryGuarantee, Sink, Source
from pyflink.datastream.connectors.dynamic_kafka import DynamicKafkaSource, DynamicKafkaSourceBuilder
from pyflink.datastream.connectors.file_system import (
    BucketAssigner,
    FileSink,
    FileSource,
    FileSourceBuilder,
    OutputFileConfig,
    RollingPolicy,
    StreamFormat,
)
from pyflink.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcExecutionOptions, JdbcSink
from pyflink.datastream.connectors.kafka import FlinkKafkaConsumer, FlinkKafkaProducer, KafkaSource, Semantic
from pyflink.datastream.connectors.number_seq import NumberSequenceSource
from pyflink.datastream.connectors.pulsar import PulsarSource, PulsarSourceBuilder, StartCursor, StopCursor
from pyflink.datastream.connectors.rabbitmq import RMQConnectionConfig, RMQSink, RMQSource

__all__ = [
    "BucketAssigner",
    "DeliveryGuarantee",
    "DynamicKafkaSource",
    "DynamicKafkaSourceBuilder",
    "FileSink",
    "FileSource",
    "FileSourceBuilder",
    "FlinkKafkaConsumer",
    "FlinkKafkaProducer",
    "JdbcConnectionOptions",
    "JdbcExecutionOptions",
    "JdbcSink",
    "KafkaSource",
    "NumberSequenceSource",
    "OutputFileConfig",
    "PulsarSource",
    "PulsarSourceBuilder",
    "RMQConnectionConfig",
    "RMQSink",
    "RMQSource",
    "RollingPolicy",
    "Semantic",
    "Sink",
    "Source",
    "StartCursor",
    "StopCursor",
    "StreamFormat",
]
