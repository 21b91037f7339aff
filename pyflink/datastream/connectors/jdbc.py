"""``pyflink.datastream.connectors.jdbc``: refused (JDBC is a Java connector); see docs/PYFLINK.md."""

from pyflink.datastream.connectors._refused import refused

JdbcSink = refused("JdbcSink", "JDBC")
JdbcConnectionOptions = refused("JdbcConnectionOptions", "JDBC")
JdbcExecutionOptions = refused("JdbcExecutionOptions", "JDBC")

__all__ = [
    "JdbcSink",
    "JdbcConnectionOptions",
    "JdbcExecutionOptions",
]
