"""Fixtures of the Spark step tests: the process's SparkSession (the holder's, as in a TaskExecutor
with 2 slots), started once for the whole test process; plain PySpark runs on that session too,
in its own ``newSession()``."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.factory import create_operator
from yarnflink.operators.spark import SparkOperator
from yarnflink.operators.specs import SparkSpec
from yarnflink.spark.session import holder

CONFIG = {"taskmanager.numberOfTaskSlots": "2"}


class ListOutput:
    def __init__(self) -> None:
        self.batches: list[Batch] = []
        self.ended = 0

    def emit(self, batch: Batch) -> None:
        self.batches.append(batch)

    def end_input(self) -> None:
        self.ended += 1

    @property
    def rows(self) -> list:
        return [r for b in self.batches for r in b.rows()]

    def table(self) -> pa.Table:
        return pa.Table.from_batches([b.arrow() for b in self.batches])


@pytest.fixture(scope="session")
def _spark_process() -> Iterator[None]:
    # the holder is process-wide: another file of this pytest worker (an end-to-end reference
    # computed in plain PySpark) may have started it with another slot count
    holder.stop()
    holder.configure(num_slots=2)
    yield
    holder.stop()


@pytest.fixture
def spark(_spark_process: None) -> Any:
    """The holder's (root) SparkSession with a thread per slot of 2; started anew if a test
    stopped it, or if another file of this pytest worker ran a TaskExecutor in-process (which sets
    the holder's slot count to its own) and started it with another."""
    holder.configure(num_slots=2)
    session = holder.get(CONFIG)
    if session.sparkContext.master != "local[2]":
        holder.stop()
        session = holder.get(CONFIG)
    return session


def open_step(
    spec: SparkSpec,
    mode: str = "BATCH",
    is_running: Callable[[], bool] = lambda: True,
    name: str = "spark",
    **config: str,
) -> tuple[SparkOperator, ListOutput]:
    spec.runtime_mode = mode  # type: ignore[assignment]
    op = create_operator(spec)
    assert isinstance(op, SparkOperator)
    out = ListOutput()
    op.output = out
    op.open(
        OperatorContext(
            task_name="task (1/1)",
            operator_name=name,
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            runtime_mode=mode,
            config={**CONFIG, **config},
            is_running=is_running,
        )
    )
    return op, out


def run_step(spec: SparkSpec, batches: list, mode: str = "BATCH", **config: str) -> tuple[SparkOperator, ListOutput]:
    """Open a Spark step, push ``batches`` (Batch, RecordBatch or list of records), end and close it."""
    op, out = open_step(spec, mode, **config)
    for b in batches:
        op.process_batch(as_batch(b))
    op.end_input()
    op.close()
    return op, out


def as_batch(b: Any) -> Batch:
    if isinstance(b, Batch):
        return b
    if isinstance(b, pa.RecordBatch):
        return Batch.from_arrow(b)
    return Batch.from_rows(b)


def plain(spark: Any, data: Any, query: str | None = None, fn: Callable[[Any], Any] | None = None) -> pa.Table:
    """The same step in plain PySpark: ``createDataFrame(arrow table)``, the query (view ``input``)
    or ``fn``, ``toArrow()``."""
    s = spark.newSession()
    df = s.createDataFrame(data)
    if query is not None:
        df.createOrReplaceTempView("input")
        return s.sql(query).toArrow()
    assert fn is not None
    return fn(df).toArrow()


def sorted_rows(table: pa.Table) -> list:
    return sorted(table.to_pylist(), key=repr)


def wait_until(predicate: Callable[[], object], timeout: float, message: str) -> object:
    """Poll ``predicate`` until it is true; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(0.05)
