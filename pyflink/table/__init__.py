"""``pyflink.table``: the Table API and SQL are not part of yarnflink. The names import; using
them raises ``UnsupportedFeatureError`` pointing at a Spark SQL step (``ds.spark_sql(query)``)."""

from typing import Any

from yarnflink.api.common import UnsupportedFeatureError

INSTEAD = (
    "a Spark SQL step on a DataStream: ds.spark_sql('SELECT word, count(*) AS n FROM input GROUP BY word') "
    "(the stream is the view `input`), or ds.transform_spark(fn) with a pyspark DataFrame function"
)


class _TableApiMeta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def refuse(*args: Any, **kwargs: Any) -> Any:
            raise UnsupportedFeatureError(
                f"{cls.__name__}.{name}()", "the Table API / SQL is not part of yarnflink", INSTEAD
            )

        return refuse


def _refused(name: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise UnsupportedFeatureError(f"{name}()", "the Table API / SQL is not part of yarnflink", INSTEAD)

    return _TableApiMeta(name, (), {"__init__": __init__, "__module__": __name__})


StreamTableEnvironment = _refused("StreamTableEnvironment")
TableEnvironment = _refused("TableEnvironment")
EnvironmentSettings = _refused("EnvironmentSettings")
DataTypes = _refused("DataTypes")
Schema = _refused("Schema")
TableDescriptor = _refused("TableDescriptor")

__all__ = [
    "DataTypes",
    "EnvironmentSettings",
    "Schema",
    "StreamTableEnvironment",
    "TableDescriptor",
    "TableEnvironment",
]
