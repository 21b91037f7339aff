"""``pyflink.datastream.connectors.kafka``: refused (Kafka is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

KafkaSource = refused("KafkaSource", "Kafka")
KafkaSourceBuilder = refused("KafkaSourceBuilder", "Kafka")
KafkaSink = refused("KafkaSink", "Kafka")
KafkaSinkBuilder = refused("KafkaSinkBuilder", "Kafka")
KafkaOffsetsInitializer = refused("KafkaOffsetsInitializer", "Kafka")
KafkaOffsetResetStrategy = refused("KafkaOffsetResetStrategy", "Kafka")
KafkaRecordSerializationSchema = refused("KafkaRecordSerializationSchema", "Kafka")
KafkaTopicPartition = refused("KafkaTopicPartition", "Kafka")
FlinkKafkaConsumer = refused("FlinkKafkaConsumer", "Kafka")
FlinkKafkaProducer = refused("FlinkKafkaProducer", "Kafka")
Semantic = refused("Semantic", "Kafka")

__all__ = [
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaOffsetsInitializer",
    "KafkaOffsetResetStrategy",
    "KafkaRecordSerializationSchema",
    "KafkaTopicPartition",
    "FlinkKafkaConsumer",
    "FlinkKafkaProducer",
    "Semantic",
]
