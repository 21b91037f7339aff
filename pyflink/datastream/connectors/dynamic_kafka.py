"""``pyflink.datastream.connectors.dynamic_kafka``: refused (Kafka is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

DynamicKafkaSource = refused("DynamicKafkaSource", "Kafka")
DynamicKafkaSourceBuilder = refused("DynamicKafkaSourceBuilder", "Kafka")
KafkaMetadataService = refused("KafkaMetadataService", "Kafka")
KafkaRecordDeserializationSchema = refused("KafkaRecordDeserializationSchema", "Kafka")
KafkaStreamSetSubscriber = refused("KafkaStreamSetSubscriber", "Kafka")
KafkaStreamSubscriber = refused("KafkaStreamSubscriber", "Kafka")
StreamPatternSubscriber = refused("StreamPatternSubscriber", "Kafka")
SingleClusterTopicMetadataService = refused("SingleClusterTopicMetadataService", "Kafka")

__all__ = [
    "DynamicKafkaSource",
    "DynamicKafkaSourceBuilder",
    "KafkaMetadataService",
    "KafkaRecordDeserializationSchema",
    "KafkaStreamSetSubscriber",
    "KafkaStreamSubscriber",
    "StreamPatternSubscriber",
    "SingleClusterTopicMetadataService",
]
