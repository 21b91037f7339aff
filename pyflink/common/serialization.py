"""``pyflink.common.serialization``: ``Encoder`` for row-format file sinks. Serialization schemas
belong to Java connectors (Kafka ...), which yarnflink refuses."""

from typing import Any

from yarnflink.api.common import UnsupportedFeatureError
from yarnflink.api.connectors import BulkWriterFactory, Encoder


class SimpleStringSchema:
    """Refused: serialization schemas only serve Java connectors."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise UnsupportedFeatureError(
            "SimpleStringSchema()",
            "serialization schemas serve Java connectors (Kafka, Pulsar, ...), which yarnflink does not run",
            "read and write files with FileSource / FileSink, whose records are Python values",
        )


__all__ = ["BulkWriterFactory", "Encoder", "SimpleStringSchema"]
