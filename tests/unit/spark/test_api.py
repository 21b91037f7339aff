"""The Spark step API: transform_spark / spark_sql record a SparkSpec (validated eagerly, without
importing pyspark in the client) that carries the job's runtime mode and chains like any operator."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from yarnflink import RuntimeExecutionMode, StreamExecutionEnvironment
from yarnflink.operators.specs import SparkSpec


def spark_nodes(env: StreamExecutionEnvironment) -> list:
    return [n for n in env.get_stream_graph().nodes.values() if isinstance(n.spec, SparkSpec)]


def test_spark_steps_record_a_spark_spec_with_the_runtime_mode() -> None:
    env = StreamExecutionEnvironment()
    env.set_runtime_mode(RuntimeExecutionMode.BATCH)

    def fn(df):
        return df

    s = (
        env.from_collection([(1, "a")])
        .transform_spark(fn, schema="n BIGINT, s STRING")
        .spark_sql("SELECT n FROM input")
    )
    s.print()
    first, second = spark_nodes(env)
    assert (first.name, first.spec.fn, first.spec.query, first.spec.schema) == (
        "Spark Transform",
        fn,
        None,
        "n BIGINT, s STRING",
    )
    assert (second.name, second.spec.fn, second.spec.query) == ("Spark SQL", None, "SELECT n FROM input")
    assert {first.spec.runtime_mode, second.spec.runtime_mode} == {"BATCH"}
    assert first.spec.kind == "spark"
    # chained with the source and the sink into one task
    (vertex,) = env.get_job_graph().vertices
    assert [o.kind for o in vertex.operators] == ["source", "spark", "spark", "sink"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.transform_spark("SELECT 1"), "transform_spark\\(\\) needs a function"),
        (lambda s: s.transform_spark(dict), "transform_spark\\(\\) needs a function"),
        (lambda s: s.spark_sql(""), "spark_sql\\(\\) needs a non-empty SQL query"),
        (lambda s: s.spark_sql(None), "spark_sql\\(\\) needs a non-empty SQL query"),
        (lambda s: s.spark_sql("SELECT 1", schema=42), "schema must be a pyspark StructType or a DDL string"),
        (lambda s: s.transform_spark(lambda df: df, schema=" "), "schema must be a pyspark StructType"),
    ],
)
def test_spark_steps_are_validated_eagerly(call, message) -> None:
    env = StreamExecutionEnvironment()
    with pytest.raises(TypeError, match=message):
        call(env.from_collection([1]))


def test_building_a_job_with_spark_steps_does_not_import_pyspark() -> None:
    code = textwrap.dedent("""
        import sys
        from yarnflink import StreamExecutionEnvironment
        env = StreamExecutionEnvironment()
        env.from_collection([1]).spark_sql("SELECT f0 FROM input").transform_spark(lambda df: df).print()
        env.get_stream_graph()
        import yarnflink.operators.factory, yarnflink.taskexecutor.taskexecutor
        print("pyspark" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=".")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
