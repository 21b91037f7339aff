"""Spark steps: ``stream.transform_spark(fn)`` and ``stream.spark_sql(query)`` (DESIGN principle 6).

The operator collects its input as Arrow record batches, hands them to the TaskExecutor's
SparkSession (``yarnflink.spark.session``) as a DataFrame, runs ``fn`` (DataFrame -> DataFrame)
or the SQL with the input registered as the temp view ``input``, and emits the result as Arrow
batches:

* BATCH: the step sees its whole input partition at once (it runs at end of input).
* STREAMING: it runs per micro-batch of at most ``spark.micro-batch.max-rows`` rows, at the latest
  ``spark.micro-batch.max-delay`` after the micro-batch's first record arrived (the Task asks
  ``next_flush_deadline`` / ``flush_if_due`` while it waits for input), and at end of input.
  ``flush()`` (``prepare_snapshot_pre_barrier``) runs the pending micro-batch at once, so that a
  checkpoint barrier never passes records still buffered here.

Moving data, never row by row through Python: a micro-batch, and a BATCH input of up to
``SPILL_ROWS`` rows (``SPILL_BYTES``), enters Spark with ``createDataFrame(pyarrow.Table)`` (Arrow IPC into the JVM,
one partition per Spark thread); a larger BATCH input is written, while it arrives, to an
uncompressed Parquet file in the session's work directory and read by Spark's vectorized Parquet
reader. Results leave Spark with ``DataFrame.toArrow()``.

Source pushdown (BATCH, ``spark.source.pushdown``): a step chained right after a ``FileSource`` of
local Parquet files is offered the source subtask's files (``accept_files``) and reads them with
Spark's Parquet reader, when Spark reads them with the schema the records would have had;
otherwise the source reads them and they arrive as Arrow batches as usual.

Schema: the records' Arrow columns (scalars: ``f0``; tuples: ``f0..fn``; dicts: their keys) with
PySpark's Arrow -> Spark type mapping, or the step's ``schema`` (a StructType or a DDL string such
as ``"word STRING, n BIGINT"``) whose fields name and type the columns by position. The result's
columns decide the records downstream: ``f0`` alone -> scalars, ``f0..fn`` -> tuples, other
names -> dicts.

Each step works in its own ``newSession()`` of the shared session (its own ``input`` view and SQL
configuration). A Spark error fails the task with Spark's exception and message.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from yarnflink.common.records import KIND_PICKLE, Batch, record_kind
from yarnflink.operators.base import OperatorContext, StreamOperator
from yarnflink.operators.specs import SparkSpec
from yarnflink.spark.options import SparkOptions
from yarnflink.spark.session import holder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

INPUT_VIEW = "input"
#: Rows per Batch emitted downstream.
OUTPUT_BATCH_ROWS = 65536
#: A BATCH-mode input larger than this (rows or bytes) goes to Spark through a Parquet file.
SPILL_ROWS = 1 << 20
SPILL_BYTES = 64 << 20
#: Smallest Spark partition made from an in-memory input (fewer, larger partitions cost less).
MIN_PARTITION_ROWS = 65536
#: Largest Arrow batch between Spark and this process.
MAX_ARROW_BATCH_ROWS = 1 << 20
#: Rows per Parquet row group of a spilled input (Spark splits its reads by row group).
SPILL_ROW_GROUP_ROWS = 1 << 20


def micro_batch_bounds(config: Mapping[str, str]) -> tuple[int, float]:
    """(max rows, max delay in seconds) of a STREAMING micro-batch from a job configuration."""
    rows = SparkOptions.MICRO_BATCH_MAX_ROWS.read(config, "job configuration")
    delay = SparkOptions.MICRO_BATCH_MAX_DELAY.read(config, "job configuration")
    return int(rows), delay.total_seconds()


class SparkOperator(StreamOperator):
    def __init__(self, spec: SparkSpec):
        if (spec.fn is None) == (spec.query is None):
            raise ValueError("a Spark step needs exactly one of a function and a query")
        self.spec = spec
        self.batch_mode = spec.runtime_mode == "BATCH"
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._pending_schema: pa.Schema | None = None
        self._first_at: float | None = None
        self._spill: _ParquetSpill | None = None
        #: BATCH source pushdown: (Parquet files, their rows, Spark's schema of them, the column
        #: names to give them)
        self._files: tuple[list[str], int, Any, list[str] | None] | None = None
        self._spark: SparkSession | None = None
        self._struct: Any = None  # the given schema as a StructType (resolved with the session)
        self._conf_set: dict[str, str] = {}
        #: (input rows, seconds) of the latest Spark runs, in order (benchmarks, logs).
        self.runs: deque[tuple[int, float]] = deque(maxlen=10_000)

    # ------------------------------------------------------------------ lifecycle
    def open(self, ctx: OperatorContext) -> None:
        super().open(ctx)
        self.max_rows, self.max_delay_s = micro_batch_bounds(ctx.config)
        self._group = f"yarnflink {ctx.task_name} / {ctx.operator_name} [{uuid.uuid4().hex[:8]}]"
        holder.start(ctx.config)  # the JVM starts while the input arrives

    def process_batch(self, batch: Batch) -> None:
        n = len(batch)
        if n == 0:
            return
        rb = self._checked(batch.arrow())
        if self.batch_mode:
            if self._spill is not None:
                self._spill.write(rb)
            else:
                self._append(rb)
                if self._pending_rows >= SPILL_ROWS or self._pending_bytes >= SPILL_BYTES:
                    self._start_spill()
            return
        offset = 0
        while offset < n:
            take = min(n - offset, self.max_rows - self._pending_rows)
            self._append(rb if take == n else rb.slice(offset, take))
            offset += take
            if self._pending_rows >= self.max_rows:
                self.flush()

    def next_flush_deadline(self) -> float | None:
        """``time.monotonic()`` by which the pending micro-batch must run (STREAMING), or None."""
        if self._first_at is None or self.batch_mode:
            return None
        return self._first_at + self.max_delay_s

    def flush_if_due(self) -> None:
        deadline = self.next_flush_deadline()
        if deadline is not None and time.monotonic() >= deadline:
            self.flush()

    def flush(self) -> None:
        """Run the step on the buffered input now and emit the result."""
        if self._pending_rows or self._spill is not None or self._files is not None:
            self._run()

    def prepare_snapshot_pre_barrier(self, checkpoint_id: int) -> None:
        """Before this task forwards checkpoint barrier ``checkpoint_id``: nothing stays buffered."""
        self.flush()

    def end_input(self) -> None:
        if self._pending_rows or self._spill is not None or self._files is not None:
            self._run()
        elif self.batch_mode and self.spec.schema is not None:
            self._run()  # an empty partition with a known schema: aggregates still give a row
        self.output.end_input()

    def close(self) -> None:
        if self._spill is not None:
            self._spill.remove()
            self._spill = None
        self._pending = []
        if self.runs:
            rows = sum(r for r, _ in self.runs)
            secs = sorted(s for _, s in self.runs)
            log.info(
                "%s: %d Spark run(s), %d rows, median %.3f s, max %.3f s",
                self._group,
                len(self.runs),
                rows,
                secs[len(secs) // 2],
                secs[-1],
            )

    # ------------------------------------------------------------------ input
    def accept_files(self, fmt: str, files: list[str], fs: Any) -> bool:
        """Source pushdown: read the chained FileSource's ``files`` in Spark instead of receiving
        them. True only in BATCH mode, for local Parquet files, before any input arrived, and
        when Spark's reader gives the columns the types the Arrow batches would have had."""
        enabled = SparkOptions.SOURCE_PUSHDOWN.read(self.ctx.config, "job configuration")
        protocol = getattr(fs, "protocol", None)
        local = protocol == "file" or (isinstance(protocol, (tuple, list)) and "file" in protocol)
        if not (
            enabled
            and self.batch_mode
            and fmt == "parquet"
            and local
            and files
            and self._pending_rows == 0
            and self._spill is None
            and self._files is None
        ):
            return False
        try:
            self._files = self._pushdown_plan(files)
        except Exception as e:  # noqa: BLE001 - unreadable for Spark: the source reads them
            log.info("%s: the source reads its files itself (%s: %s)", self._group, type(e).__name__, e)
            self._files = None
        return self._files is not None

    def _pushdown_plan(self, files: list[str]) -> tuple[list[str], int, Any, list[str] | None] | None:
        schemas = [pq.read_schema(f) for f in files]
        arrow = schemas[0].remove_metadata()
        if any(not s.remove_metadata().equals(arrow) for s in schemas[1:]) or not len(arrow):
            return None
        # the session first: the thread starting it imports pyspark, and importing pyspark from two
        # threads at once can end in an import deadlock
        spark = self._session()
        from pyspark.sql.pandas.types import from_arrow_schema  # deferred: pyspark, in Spark steps only

        struct = self._resolve_struct()
        if struct is None:
            ntz = spark.conf.get("spark.sql.timestampType") == "TIMESTAMP_NTZ"
            struct = from_arrow_schema(arrow, prefer_timestamp_ntz=ntz)
        elif len(struct.fields) != len(arrow):
            return None  # the usual path reports the mismatch
        read = spark.read.parquet(*files).schema
        if [f.dataType for f in read.fields] != [f.dataType for f in struct.fields] or read.names != arrow.names:
            log.info(
                "%s: the source reads its files itself (Spark would read them as %s, the records are %s)",
                self._group,
                read.simpleString(),
                struct.simpleString(),
            )
            return None
        rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        if not rows:
            return None  # no input: the step does not run (as on the Arrow path)
        return list(files), rows, read, (struct.names if struct.names != arrow.names else None)

    def _checked(self, rb: pa.RecordBatch) -> pa.RecordBatch:
        if record_kind(rb) == KIND_PICKLE:
            raise TypeError(
                f"Spark step {self.ctx.operator_name!r}: its input records have no Arrow schema (they "
                "are pickled Python objects: values of mixed types, nested containers or arbitrary "
                "objects); a Spark step needs scalars, tuples or dicts whose fields each hold one "
                "primitive type"
            )
        return rb.replace_schema_metadata(None)

    def _append(self, rb: pa.RecordBatch) -> None:
        if self._first_at is None:
            self._first_at = time.monotonic()
        self._pending.append(rb)
        self._pending_rows += rb.num_rows
        self._pending_bytes += rb.nbytes
        schema = self._pending_schema
        if schema is None:
            self._pending_schema = rb.schema
        elif not schema.equals(rb.schema):
            self._pending_schema = _unify(schema, rb.schema, self.ctx.operator_name)

    def _start_spill(self) -> None:
        """BATCH: move the buffered input to a Parquet file; later batches are appended to it.
        Waits while a column has only nulls so far (its type is not known yet)."""
        schema = self._pending_schema
        assert schema is not None
        if any(pa.types.is_null(t) for t in schema.types):
            return
        spark = self._session()
        target, struct = self._spark_schema(spark, schema)
        self._time_zone = spark.conf.get("spark.sql.session.timeZone")
        self._spill = _ParquetSpill(
            holder.new_workdir("spill-"),
            schema,
            struct,
            lambda t: self._to_spark_arrow(spark, t, struct, target),
            self.ctx.operator_name,
        )
        for rb in self._pending:
            self._spill.write(rb)
        self._pending, self._pending_rows, self._pending_bytes, self._pending_schema = [], 0, 0, None

    # ------------------------------------------------------------------ Spark
    def _session(self) -> SparkSession:
        if self._spark is None:
            root = holder.get(self.ctx.config)
            spark = root.newSession()
            for k, v in self.ctx.config.items():  # this job's SQL settings, for this step only
                if k.startswith("spark.sql.") and root.conf.get(k, None) != v:
                    try:
                        spark.conf.set(k, v)
                    except Exception as e:  # noqa: BLE001 - a static SQL key, fixed at session start
                        log.warning("%s=%s is ignored for %s: %s", k, v, self._group, e)
            self._threads = max(1, root.sparkContext.defaultParallelism)
            self._spark = spark
        return self._spark

    def _set_conf(self, spark: SparkSession, key: str, value: str) -> None:
        if self._conf_set.get(key) != value:
            spark.conf.set(key, value)
            self._conf_set[key] = value

    def _resolve_struct(self) -> Any:
        if self._struct is None and self.spec.schema is not None:
            from pyspark.sql.types import DataType, StructType  # deferred: pyspark, in Spark steps only

            s = self.spec.schema
            struct = DataType.fromDDL(s) if isinstance(s, str) else s
            if not isinstance(struct, StructType):
                raise TypeError(
                    f"Spark step {self.ctx.operator_name!r}: the schema must describe a struct, got {struct!r}"
                )
            self._struct = struct
        return self._struct

    def _spark_schema(self, spark: SparkSession, arrow_schema: pa.Schema) -> tuple[pa.Schema, Any]:
        """(Arrow schema the data takes in Spark, Spark StructType) for input of ``arrow_schema``."""
        # deferred: pyspark, in Spark steps only
        from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

        struct = self._resolve_struct()
        if struct is not None:
            if len(struct.fields) != len(arrow_schema):
                raise ValueError(
                    f"Spark step {self.ctx.operator_name!r}: the schema has {len(struct.fields)} fields but "
                    f"the records have {len(arrow_schema)} ({', '.join(arrow_schema.names)})"
                )
        else:
            ntz = spark.conf.get("spark.sql.timestampType") == "TIMESTAMP_NTZ"
            struct = from_arrow_schema(arrow_schema, prefer_timestamp_ntz=ntz)
        large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes") == "true"
        target = to_arrow_schema(
            struct, error_on_duplicated_field_names_in_struct=True, timezone="UTC", prefers_large_types=large
        )
        return target, struct

    def _to_spark_arrow(self, spark: SparkSession, table: pa.Table, struct: Any, target: pa.Schema) -> pa.Table:
        """What ``createDataFrame(table, struct)`` makes of ``table`` before it enters the JVM."""
        # deferred: pyspark, in Spark steps only
        from pyspark.sql.pandas.types import _check_arrow_table_timestamps_localize

        table = table.rename_columns(target.names)
        table = _check_arrow_table_timestamps_localize(table, struct, True, self._time_zone)
        return table if table.schema.equals(target) else table.cast(target)

    def _input_frame(self, spark: SparkSession) -> tuple[DataFrame, int]:
        spill = self._spill
        rows = spill.rows if spill is not None else self._files[1] if self._files is not None else self._pending_rows
        # Arrow batch size both ways: in-memory input -> one partition per Spark thread; results
        # in large batches (toArrow with Spark's default of 10,000 rows costs ~40% more)
        batch_rows = min(MAX_ARROW_BATCH_ROWS, max(MIN_PARTITION_ROWS, -(-rows // self._threads)))
        self._set_conf(spark, "spark.sql.execution.arrow.maxRecordsPerBatch", str(batch_rows))
        if spill is not None:
            return spark.read.schema(spill.struct).parquet(spill.close()), rows
        if self._files is not None:
            files, _, read, names = self._files
            df = spark.read.schema(read).parquet(*files)  # the schema known: no second inference
            return (df.toDF(*names) if names is not None else df), rows
        struct = self._resolve_struct()
        if rows == 0:
            return spark.createDataFrame([], struct), 0
        batches, schema = self._pending, self._pending_schema
        assert schema is not None
        table = pa.Table.from_batches(
            [b if b.schema.equals(schema) else _cast(b, schema, self.ctx.operator_name) for b in batches], schema=schema
        ).combine_chunks()
        if struct is not None:
            target, struct = self._spark_schema(spark, schema)
            return spark.createDataFrame(table.rename_columns(target.names), struct), rows
        return spark.createDataFrame(table), rows

    def _apply(self, spark: SparkSession, df: DataFrame) -> DataFrame:
        if self.spec.query is not None:
            df.createOrReplaceTempView(INPUT_VIEW)
            return spark.sql(self.spec.query)
        from pyspark.sql import DataFrame  # deferred: pyspark, in Spark steps only

        out = self.spec.fn(df)  # type: ignore[misc]
        if not isinstance(out, DataFrame):
            raise TypeError(
                f"transform_spark operator {self.ctx.operator_name!r}: the function must return a "
                f"pyspark.sql.DataFrame, got {type(out).__name__}"
            )
        return out

    def _run(self) -> None:
        t0 = time.perf_counter()
        spark = self._session()
        try:
            with holder.running(spark, self._group, self.ctx.is_running):
                df, rows = self._input_frame(spark)
                result = self._apply(spark, df).toArrow()
        except Exception as e:
            if self.ctx.is_running():
                e.add_note(f"in Spark step {self.ctx.operator_name!r} of task {self.ctx.task_name!r}")
            raise
        finally:
            self._pending, self._pending_rows, self._pending_bytes = [], 0, 0
            self._pending_schema, self._first_at = None, None
            self._files = None
            if self._spill is not None:
                self._spill.remove()
                self._spill = None
        self.runs.append((rows, time.perf_counter() - t0))
        for rb in result.to_batches(max_chunksize=OUTPUT_BATCH_ROWS):
            if rb.num_rows:
                self.output.emit(Batch.from_arrow(rb))


# ----------------------------------------------------------------------------- helpers
def _unify(a: pa.Schema, b: pa.Schema, operator: str) -> pa.Schema:
    try:
        return pa.unify_schemas([a, b], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise TypeError(f"Spark step {operator!r}: its input records changed type ({a} vs {b}): {e}") from None


def _cast(rb: pa.RecordBatch, schema: pa.Schema, operator: str) -> pa.RecordBatch:
    try:
        if rb.schema.names != schema.names:  # unify_schemas may add or reorder columns
            rb = pa.RecordBatch.from_arrays(
                [
                    rb.column(n) if n in rb.schema.names else pa.nulls(rb.num_rows, schema.field(n).type)
                    for n in schema.names
                ],
                names=schema.names,
            )
        return rb.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise TypeError(
            f"Spark step {operator!r}: cannot bring input records of {rb.schema} to {schema}: {e}"
        ) from None


class _ParquetSpill:
    """A BATCH step's input as an uncompressed Parquet file, written while the input arrives:
    batches of the ``source`` Arrow schema, converted by ``convert`` (a Table function) to the
    form Spark reads, in row groups of ``SPILL_ROW_GROUP_ROWS``."""

    def __init__(
        self, directory: str, source: pa.Schema, struct: Any, convert: Callable[[pa.Table], pa.Table], operator: str
    ) -> None:
        self.directory = directory
        self.path = os.path.join(directory, "input.parquet")
        self.source = source
        self.struct = struct
        self._convert = convert
        self._operator = operator
        self.rows = 0
        self._writer: pq.ParquetWriter | None = None
        self._group: list[pa.RecordBatch] = []
        self._group_rows = 0

    def write(self, rb: pa.RecordBatch) -> None:
        if not rb.schema.equals(self.source):
            extra = set(rb.schema.names) - set(self.source.names)
            if extra:
                raise TypeError(
                    f"Spark step {self._operator!r}: its input records gained fields {sorted(extra)} "
                    f"after the first {self.rows} records ({', '.join(self.source.names)})"
                )
            rb = _cast(rb, self.source, self._operator)
        self._group.append(rb)
        self._group_rows += rb.num_rows
        self.rows += rb.num_rows
        if self._group_rows >= SPILL_ROW_GROUP_ROWS:
            self._write_group()

    def _write_group(self) -> None:
        if not self._group:
            return
        table = self._convert(pa.Table.from_batches(self._group, schema=self.source))
        if self._writer is None:
            self._writer = pq.ParquetWriter(
                self.path, table.schema, compression="none", use_dictionary=False, write_statistics=False
            )
        self._writer.write_table(table, row_group_size=SPILL_ROW_GROUP_ROWS)
        self._group, self._group_rows = [], 0

    def close(self) -> str:
        """Finish the file; its path."""
        self._write_group()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        return self.path

    def remove(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        shutil.rmtree(self.directory, ignore_errors=True)
