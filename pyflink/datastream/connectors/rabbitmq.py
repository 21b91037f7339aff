"""``pyflink.datastream.connectors.rabbitmq``: refused (RabbitMQ is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

RMQSource = refused("RMQSource", "RabbitMQ")
RMQSink = refused("RMQSink", "RabbitMQ")
RMQConnectionConfig = refused("RMQConnectionConfig", "RabbitMQ")

__all__ = [
    "RMQSource",
    "RMQSink",
    "RMQConnectionConfig",
]
