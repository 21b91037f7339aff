"""The State Processor API on Spark (Flink's ``flink-state-processor-api``): savepoints read as
Spark DataFrames and written from them (``savepoints``). It sits above ``yarnflink.checkpoint``
(savepoint metadata and storage) and ``yarnflink.state`` (state handles and the heap backend's
snapshot format); nothing in the runtime imports it. pyspark is imported when a function is called.
"""

from yarnflink.state_processor.savepoints import StateProcessorError, bootstrap_savepoint, read_savepoint

__all__ = ["StateProcessorError", "bootstrap_savepoint", "read_savepoint"]
