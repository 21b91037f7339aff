"""``pyflink.datastream.connectors.cassandra``: refused (Cassandra is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

CassandraSink = refused("CassandraSink", "Cassandra")
CassandraCommitter = refused("CassandraCommitter", "Cassandra")

__all__ = [
    "CassandraSink",
    "CassandraCommitter",
]
