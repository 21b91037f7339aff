"""``pyflink.datastream.connectors.elasticsearch``: refused (Elasticsearch is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

Elasticsearch6SinkBuilder = refused("Elasticsearch6SinkBuilder", "Elasticsearch")
Elasticsearch7SinkBuilder = refused("Elasticsearch7SinkBuilder", "Elasticsearch")
ElasticsearchSink = refused("ElasticsearchSink", "Elasticsearch")
FlushBackoffType = refused("FlushBackoffType", "Elasticsearch")

__all__ = [
    "Elasticsearch6SinkBuilder",
    "Elasticsearch7SinkBuilder",
    "ElasticsearchSink",
    "FlushBackoffType",
]
