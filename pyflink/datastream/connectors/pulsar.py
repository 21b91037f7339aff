"""``pyflink.datastream.connectors.pulsar``: refused (Pulsar is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

PulsarSource = refused("PulsarSource", "Pulsar")
PulsarSourceBuilder = refused("PulsarSourceBuilder", "Pulsar")
PulsarSink = refused("PulsarSink", "Pulsar")
PulsarSinkBuilder = refused("PulsarSinkBuilder", "Pulsar")
StartCursor = refused("StartCursor", "Pulsar")
StopCursor = refused("StopCursor", "Pulsar")
PulsarDeserializationSchema = refused("PulsarDeserializationSchema", "Pulsar")
PulsarSerializationSchema = refused("PulsarSerializationSchema", "Pulsar")

__all__ = [
    "PulsarSource",
    "PulsarSourceBuilder",
    "PulsarSink",
    "PulsarSinkBuilder",
    "StartCursor",
    "StopCursor",
    "PulsarDeserializationSchema",
    "PulsarSerializationSchema",
]
