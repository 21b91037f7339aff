"""Java connectors yarnflink does not run: their classes import, and any use (construction or a
builder such as ``KafkaSource.builder()``) raises ``UnsupportedFeatureError`` naming the call."""

from typing import Any

from yarnflink.api.common import UnsupportedFeatureError

INSTEAD = (
    "read and write files with FileSource / FileSink (any fsspec URL: local, HDFS, S3), or run a Spark step "
    "(ds.transform_spark(fn) / ds.spark_sql(query)) whose Spark session reads or writes the system "
    "(e.g. Spark's Kafka source); see docs/PYFLINK.md"
)


def _raise(call: str, system: str) -> Any:
    raise UnsupportedFeatureError(call, f"{system} is a Java connector and yarnflink runs no JVM", INSTEAD)


class _RefusedMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return lambda *args, **kwargs: _raise(f"{cls.__name__}.{name}()", cls._system)  # type: ignore[attr-defined]


def refused(name: str, system: str) -> type:
    """A class named ``name`` whose construction and static methods raise."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _raise(f"{name}()", system)

    return _RefusedMeta(name, (), {"__init__": __init__, "_system": system, "__module__": __name__})
