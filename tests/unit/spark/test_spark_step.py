"""The Spark step operator on real PySpark (local mode): its output equals plain PySpark's on the
same data, in BATCH mode (whole partition, in memory or through a Parquet file) and in STREAMING
mode (micro-batches bounded by rows and delay, flushed on demand)."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field

import pyarrow as pa
import pytest

from yarnflink.common.records import Batch, records_to_arrow
from yarnflink.operators import spark as spark_op
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.specs import SparkSpec

from .conftest import CONFIG, ListOutput, open_step, plain, run_step, sorted_rows

pytestmark = pytest.mark.timeout(180)

T0 = datetime.datetime(2026, 1, 1, 12, 0, 0)


def records(n: int, start: int = 0) -> list[dict]:
    return [
        {
            "id": i,
            "name": f"n{i % 37}",
            "score": None if i % 11 == 0 else (i % 100) / 4,
            "ok": i % 3 != 0,
            "at": T0 + datetime.timedelta(seconds=i),
        }
        for i in range(start, start + n)
    ]


def chunks(rows: list, size: int) -> list[list]:
    return [rows[i : i + size] for i in range(0, len(rows), size)]


def arrow_of(batches: list[list]) -> pa.Table:
    """The records as the step receives them: each batch converted to Arrow by yarnflink."""
    return pa.Table.from_batches([records_to_arrow(b) for b in batches]).replace_schema_metadata(None)


QUERY = "SELECT id, upper(name) AS name, score * 2 AS s2, at FROM input WHERE ok AND score IS NOT NULL"


def test_sql_step_in_batch_mode_sees_the_whole_partition_and_equals_plain_pyspark(spark) -> None:
    batches = chunks(records(5000), 700)
    op, out = run_step(SparkSpec(query=QUERY), batches, "BATCH")
    expected = plain(spark, arrow_of(batches), QUERY)
    assert op.runs and [rows for rows, _ in op.runs] == [5000]  # one Spark run over all input
    got = out.table()
    assert got.schema.remove_metadata() == expected.schema.remove_metadata()
    assert sorted_rows(got) == sorted_rows(expected)
    assert len(expected) > 2000
    assert out.ended == 1

    # an aggregate over the partition: one row
    _, agg = run_step(SparkSpec(query="SELECT count(*) AS n, sum(id) AS s FROM input"), batches, "BATCH")
    assert agg.rows == [{"n": 5000, "s": sum(range(5000))}]


def test_large_batch_input_goes_through_a_parquet_file_with_the_same_result(spark, monkeypatch) -> None:
    monkeypatch.setattr(spark_op, "SPILL_ROWS", 1000)
    monkeypatch.setattr(spark_op, "SPILL_ROW_GROUP_ROWS", 1500)
    batches = chunks(records(6000), 500)
    op, out = open_step(SparkSpec(query=QUERY), "BATCH")
    for b in batches:
        op.process_batch(Batch.from_rows(b))
    spill = op._spill
    assert spill is not None and spill.rows == 6000  # written while the input arrived
    op.end_input()
    op.close()
    expected = plain(spark, arrow_of(batches), QUERY)
    got = out.table()
    assert got.schema.remove_metadata() == expected.schema.remove_metadata()  # timestamps included
    assert sorted_rows(got) == sorted_rows(expected)
    assert [rows for rows, _ in op.runs] == [6000]


def test_batch_spill_waits_for_the_type_of_an_all_null_column(spark, monkeypatch) -> None:
    monkeypatch.setattr(spark_op, "SPILL_ROWS", 10)
    nulls = [{"k": i, "v": None} for i in range(20)]  # v: Arrow type null
    typed = [{"k": i, "v": i * 1.5} for i in range(20, 40)]
    op, out = open_step(SparkSpec(query="SELECT k, v FROM input WHERE k % 2 = 0"), "BATCH")
    op.process_batch(Batch.from_rows(nulls))
    assert op._spill is None  # v has no type yet
    op.process_batch(Batch.from_rows(typed))
    assert op._spill is not None
    op.end_input()
    assert sorted(out.rows, key=lambda r: r["k"]) == [
        {"k": k, "v": None if k < 20 else k * 1.5} for k in range(0, 40, 2)
    ]


def test_streaming_micro_batches_are_bounded_by_max_rows_and_keep_order(spark) -> None:
    batches = chunks(records(3500), 700)
    op, out = run_step(
        SparkSpec(query="SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM input"),
        batches,
        "STREAMING",
        **{"spark.micro-batch.max-rows": "1000"},
    )
    assert [rows for rows, _ in op.runs] == [1000, 1000, 1000, 500]
    assert out.rows == [
        {"n": 1000, "lo": 0, "hi": 999},
        {"n": 1000, "lo": 1000, "hi": 1999},
        {"n": 1000, "lo": 2000, "hi": 2999},
        {"n": 500, "lo": 3000, "hi": 3499},
    ]


def test_transform_spark_in_streaming_mode_equals_plain_pyspark(spark) -> None:
    def fn(df):
        return df.where("score > 10").selectExpr("id", "name", "score + id AS total", "date_trunc('minute', at) AS m")

    batches = chunks(records(4000), 300)
    op, out = run_step(SparkSpec(fn=fn), batches, "STREAMING", **{"spark.micro-batch.max-rows": "1500"})
    assert [rows for rows, _ in op.runs] == [1500, 1500, 1000]
    expected = plain(spark, arrow_of(batches), fn=fn)
    got = out.table()
    assert got.schema.remove_metadata() == expected.schema.remove_metadata()
    assert sorted_rows(got) == sorted_rows(expected)


@dataclass
class Desc:
    node_id: int
    name: str
    kind: str
    spec: object
    chained_outputs: list = field(default_factory=list)
    output_datasets: list = field(default_factory=list)


def chain_with_step(max_delay: str) -> tuple[OperatorChain, ListOutput]:
    net = ListOutput()
    config = {**CONFIG, "spark.micro-batch.max-delay": max_delay}
    chain = OperatorChain(
        [Desc(1, "Spark SQL", "spark", SparkSpec(query="SELECT f0 * 10 AS f0 FROM input"), [], ["ds"])],
        {"ds": net},
        lambda name: OperatorContext(
            task_name="t",
            operator_name=name,
            subtask_index=0,
            parallelism=1,
            max_parallelism=128,
            runtime_mode="STREAMING",
            config=config,
        ),
    )
    chain.open()
    return chain, net


def test_streaming_micro_batch_runs_when_its_max_delay_is_due_through_the_chain(spark) -> None:
    # a Task waits for input at most until chain.next_flush_deadline(), then calls flush_if_due()
    chain, net = chain_with_step("1 h")
    before = time.monotonic()
    chain.push(Batch.from_rows([1, 2, 3]))
    deadline = chain.next_flush_deadline()
    assert deadline is not None and before + 3600 <= deadline <= time.monotonic() + 3600
    chain.flush_if_due()
    assert net.rows == []  # not due for an hour

    chain, net = chain_with_step("0 ms")
    chain.push(Batch.from_rows([1, 2, 3]))
    assert chain.next_flush_deadline() is not None
    chain.flush_if_due()
    assert net.rows == [10, 20, 30]
    assert chain.next_flush_deadline() is None  # nothing pending any more
    chain.end_input()
    chain.close()


def test_flush_before_a_checkpoint_barrier_leaves_nothing_buffered(spark) -> None:
    op, out = open_step(SparkSpec(query="SELECT f0, f1 FROM input"), "STREAMING")
    op.process_batch(Batch.from_rows([(i, str(i)) for i in range(10)]))
    assert out.rows == []  # below max-rows, before max-delay
    op.prepare_snapshot_pre_barrier(1)
    assert out.rows == [(i, str(i)) for i in range(10)]  # f0..fn columns: tuples again
    op.flush()  # nothing pending: no Spark run
    op.end_input()
    assert len(op.runs) == 1 and out.ended == 1


def test_a_given_schema_names_and_types_the_fields_by_position(spark) -> None:
    from pyspark.sql.types import IntegerType, StringType, StructField, StructType

    data = [("a", 1), ("b", 2), ("c", 3)]
    for schema in (
        "word STRING, n INT",
        StructType([StructField("word", StringType()), StructField("n", IntegerType())]),
    ):
        for mode in ("BATCH", "STREAMING"):
            _, out = run_step(
                SparkSpec(query="SELECT word, n * 10 AS m FROM input WHERE n > 1", schema=schema), [data], mode
            )
            assert out.rows == [{"word": "b", "m": 20}, {"word": "c", "m": 30}]
            assert out.table().schema.field("m").type == pa.int32()

    with pytest.raises(ValueError, match=r"the schema has 3 fields but the records have 2 \(f0, f1\)"):
        run_step(SparkSpec(query="SELECT * FROM input", schema="a STRING, b INT, c INT"), [data], "BATCH")


def test_empty_batch_partition_runs_only_with_a_known_schema(spark) -> None:
    op, out = run_step(SparkSpec(query="SELECT count(*) AS n FROM input", schema="x BIGINT"), [], "BATCH")
    assert out.rows == [{"n": 0}]
    op, out = run_step(SparkSpec(query="SELECT count(*) AS n FROM input"), [], "BATCH")
    assert out.rows == [] and not op.runs and out.ended == 1


def test_result_columns_decide_the_records_downstream(spark) -> None:
    _, scalars = run_step(SparkSpec(query="SELECT f0 * 2 AS f0 FROM input"), [[1, 2, 3]])
    assert scalars.rows == [2, 4, 6]
    _, tuples = run_step(SparkSpec(query="SELECT f0, f0 + 1 AS f1 FROM input"), [[1, 2]])
    assert tuples.rows == [(1, 2), (2, 3)]
    _, dicts = run_step(SparkSpec(query="SELECT f0 AS x FROM input"), [[1, 2]])
    assert dicts.rows == [{"x": 1}, {"x": 2}]


def test_spark_errors_keep_sparks_exception_and_message(spark) -> None:
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN") as info:
        run_step(SparkSpec(query="SELECT nope FROM input"), [[1, 2]], "BATCH")
    assert any("in Spark step 'spark'" in n for n in info.value.__notes__)

    with pytest.raises(TypeError, match=r"must return a pyspark\.sql\.DataFrame, got int"):
        run_step(SparkSpec(fn=lambda df: 42), [[1, 2]], "BATCH")

    with pytest.raises(TypeError, match="no Arrow schema"):
        run_step(SparkSpec(query="SELECT * FROM input"), [[1, "mixed"]], "BATCH")
