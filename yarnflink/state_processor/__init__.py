"""The State Processor API on Spark (Flink's ``flink-state-processor-api``): savepoints read as
Spark DataFrames and written from them (``savepoints``). It sits above ``yarnflink.checkpoint``
(savepoint metadata and storage) and ``yarnflink.state`` (state handles and the heap backend's
snapshot format); nothing in the runtime imports it. pyspark is imported when a function is called.
"""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.state_processor.savepoints import StateProcessorError, bootstrap_savepoint, read_savepoint

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.state_processor.savepoints": ("StateProcessorError", "bootstrap_savepoint", "read_savepoint"),
    },
)

__all__ = ["StateProcessorError", "bootstrap_savepoint", "read_savepoint"]
