"""Spark inside a TaskExecutor (DESIGN principle 6): the process-wide SparkSession
(``yarnflink.spark.session``). The Spark step operator is ``yarnflink.operators.spark``.

Nothing here imports pyspark until a Spark step needs it.
"""
