"""Source pushdown: a BATCH Spark step chained after a FileSource of local Parquet files reads the
source subtask's files with Spark's reader (the source emits nothing) and gives the same result
as the Arrow path; files Spark would read with other types, STREAMING mode and
``spark.source.pushdown: false`` keep the Arrow path."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import cloudpickle
import pyarrow as pa
import pyarrow.parquet as pq

from yarnflink.operators.base import OperatorContext
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.specs import FileSourceSpec, SparkSpec

from .conftest import CONFIG, ListOutput, plain, sorted_rows

QUERY = "SELECT key, count(*) AS n, sum(value) AS total FROM input WHERE value % 3 <> 0 GROUP BY key"


class _Desc:
    def __init__(self, node_id: int, spec: Any, chained: list[int]) -> None:
        self.node_id, self.name, self.kind = node_id, f"{type(spec).__name__}-{node_id}", spec.kind
        self.spec, self.chained_outputs, self.output_datasets, self.uid = cloudpickle.dumps(spec), chained, [], ""


def run_chain(
    path: Path, spec: SparkSpec, mode: str = "BATCH", parallelism: int = 1, **config: str
) -> tuple[list, int, Any]:
    """FileSource(path) -> Spark step, every subtask; (result rows, batches the sources emitted,
    the last Spark operator)."""
    spec.runtime_mode = mode  # type: ignore[assignment]
    rows, emitted, op = [], 0, None
    for i in range(parallelism):
        chain = OperatorChain(
            [_Desc(1, FileSourceSpec(str(path), "parquet"), [2]), _Desc(2, spec, [])],
            {},
            lambda name: OperatorContext(
                task_name="t",
                operator_name=name,
                subtask_index=i,
                parallelism=parallelism,
                max_parallelism=128,
                runtime_mode=mode,
                config={**CONFIG, **config},
            ),
        )
        op = chain.operators[2]
        out = ListOutput()
        op.output = out
        chain.open()
        for b in chain.source_batches():
            emitted += 1
            chain.push(b)
        chain.end_input()
        chain.close()
        rows += out.rows
    return rows, emitted, op


def write(path: Path, files: int = 2, rows: int = 3000, **extra: Any) -> pa.Table:
    path.mkdir()
    tables = []
    for i in range(files):
        ids = list(range(i * rows, (i + 1) * rows))
        t = pa.table(
            {
                "key": [x % 7 for x in ids],
                "value": [(x * 13) % 101 for x in ids],
                **{k: v[i * rows : (i + 1) * rows] for k, v in extra.items()},
            }
        )
        pq.write_table(t, path / f"part-{i}.parquet")
        tables.append(t)
    return pa.concat_tables(tables)


def test_a_batch_step_after_a_parquet_file_source_reads_the_files_itself(spark, tmp_path: Path) -> None:
    data = write(tmp_path / "in")
    got, emitted, op = run_chain(tmp_path / "in", SparkSpec(query=QUERY))
    assert emitted == 0  # the source handed its files over
    assert [r for r, _ in op.runs] == [6000]
    assert sorted(got, key=repr) == sorted_rows(plain(spark, data, QUERY))
    # two subtasks: each reads its own file split
    got2, emitted2, _ = run_chain(tmp_path / "in", SparkSpec(query="SELECT key, value FROM input"), parallelism=2)
    assert emitted2 == 0 and len(got2) == 6000
    # a given schema renames the columns by position, as on the Arrow path
    got3, emitted3, _ = run_chain(
        tmp_path / "in", SparkSpec(query="SELECT k, sum(v) AS s FROM input GROUP BY k", schema="k BIGINT, v BIGINT")
    )
    assert emitted3 == 0 and len(got3) == 7


def test_the_arrow_path_stays_when_spark_would_read_other_types_or_pushdown_is_off(spark, tmp_path: Path) -> None:
    # a timestamp without time zone: Spark's Parquet reader says TIMESTAMP_NTZ, the Arrow path TIMESTAMP
    t0 = datetime.datetime(2026, 11, 22, 8, 0)
    data = write(tmp_path / "ntz", when=[t0 + datetime.timedelta(seconds=s) for s in range(6000)])
    query = "SELECT key, min(when) AS first FROM input GROUP BY key"
    got, emitted, _ = run_chain(tmp_path / "ntz", SparkSpec(query=query))
    assert emitted > 0
    assert sorted(got, key=repr) == sorted_rows(plain(spark, data, query))

    write(tmp_path / "in")
    _, emitted, _ = run_chain(tmp_path / "in", SparkSpec(query=QUERY), **{"spark.source.pushdown": "false"})
    assert emitted > 0
    _, emitted, _ = run_chain(tmp_path / "in", SparkSpec(query="SELECT key FROM input"), mode="STREAMING")
    assert emitted > 0
