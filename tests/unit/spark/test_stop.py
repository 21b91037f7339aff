"""A Spark step after the JVM died gets a new session; stopping the holder's SparkSession (as a
TaskExecutor does when it stops) ends its JVM and removes its work directory. Runs after the other
Spark tests of this directory (file order), which share one session."""

from __future__ import annotations

import os

import pytest

from yarnflink.operators.specs import SparkSpec
from yarnflink.spark.session import holder

from .conftest import run_step

pytestmark = pytest.mark.timeout(180)


def test_a_step_after_the_jvm_died_gets_a_new_session(spark) -> None:
    from pyspark import SparkContext

    proc = SparkContext._gateway.proc  # type: ignore[union-attr]
    proc.kill()  # as an out-of-memory crash would
    proc.wait()
    starts = holder.starts
    _, out = run_step(SparkSpec(query="SELECT f0 * 3 AS f0 FROM input"), [[1, 2]], "BATCH")
    assert out.rows == [3, 6]
    assert holder.starts == starts + 1
    assert SparkContext._gateway.proc.poll() is None  # type: ignore[union-attr]  # a new JVM


def test_stop_ends_the_jvm_and_removes_the_work_directory(spark) -> None:
    from pyspark import SparkContext

    proc = SparkContext._gateway.proc  # type: ignore[union-attr]
    workdir = holder.workdir
    assert proc.poll() is None and workdir is not None and os.path.isdir(workdir)
    holder.stop()
    assert proc.poll() is not None  # the JVM has exited
    assert not os.path.exists(workdir)
    assert not holder.active and SparkContext._gateway is None
