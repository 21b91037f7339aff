"""Options of Spark steps (``yarnflink.operators.spark``); the other ``spark.*`` keys are passed
through to the TaskExecutor's SparkSession (docs/SPARK.md).
"""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["SparkOptions"]


class SparkOptions:
    """How records are handed to Spark."""

    MICRO_BATCH_MAX_ROWS = ConfigOption(
        "spark.micro-batch.max-rows",
        "int",
        100_000,
        "STREAMING: most rows a Spark step (transform_spark, spark_sql) hands to Spark at once.",
        min_value=1,
    )
    MICRO_BATCH_MAX_DELAY = ConfigOption(
        "spark.micro-batch.max-delay",
        "duration",
        "1 s",
        "STREAMING: longest time a record waits in a Spark step's micro-batch before the batch runs.",
    )
    SOURCE_PUSHDOWN = ConfigOption(
        "spark.source.pushdown",
        "bool",
        True,
        "BATCH: a Spark step chained right after a FileSource of local Parquet files reads the source "
        "subtask's files itself with Spark's Parquet reader (when Spark reads them with the schema the "
        "records would have), instead of receiving them as Arrow batches.",
    )
