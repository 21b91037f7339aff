"""Operator specs: the picklable description of each operator in a JobGraph.

The API (``yarnflink.api``) builds these; the StreamGraph/JobGraph carry them as cloudpickled
bytes; a TaskExecutor unpickles them and turns each into a running operator with
``yarnflink.operators.factory.create_operator(spec)``. The master never unpickles a spec.

A field reference (``Field``) is an ``int`` (tuple position, or column index of an Arrow batch)
or a ``str`` (dict key, or Arrow column name).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Union

Field = Union[int, str]
RuntimeMode = Literal["STREAMING", "BATCH"]


# ----------------------------------------------------------------------------- sources
@dataclass
class CollectionSourceSpec:
    """``env.from_collection(items)``: subtask i emits items[i::parallelism] (in order)."""

    items: list[Any]
    kind: str = "source"


@dataclass
class SequenceSourceSpec:
    """``env.from_sequence(start, end)``: both ends included; the range is split into
    ``parallelism`` contiguous pieces; emitted as int64 Arrow batches (scalar records)."""

    start: int
    end: int
    kind: str = "source"


@dataclass
class FileSourceSpec:
    """``FileSource(path, format=...)``: ``path`` is an fsspec URL of a file or a directory
    (all files below it, sorted). Files are split across subtasks (split i goes to subtask
    i % parallelism). Records are dicts (one per row)."""

    path: str
    format: Literal["parquet", "csv", "jsonl", "text"]  # text: one str record per line
    storage_options: dict[str, Any] = field(default_factory=dict)
    kind: str = "source"


# ----------------------------------------------------------------------------- transforms
@dataclass
class MapSpec:
    fn: Callable[[Any], Any]
    kind: str = "map"


@dataclass
class FlatMapSpec:
    fn: Callable[[Any], Any]  # returns an iterable (or is a generator function)
    kind: str = "flat_map"


@dataclass
class FilterSpec:
    fn: Callable[[Any], bool]
    kind: str = "filter"


@dataclass
class MapBatchesSpec:
    """``map_batches(fn)``: fn takes a pyarrow.RecordBatch and returns a RecordBatch or Table."""

    fn: Callable[[Any], Any]
    kind: str = "map_batches"


@dataclass
class SparkSpec:
    """``transform_spark(fn)`` (fn: pyspark DataFrame -> DataFrame) or ``spark_sql(query)`` (the
    input is the temp view ``input``); ``schema``: a pyspark StructType, a DDL string, or None
    (from the records' Arrow schema). See ``yarnflink.operators.spark``."""

    fn: Callable[[Any], Any] | None = None
    query: str | None = None
    schema: Any = None
    runtime_mode: RuntimeMode = "STREAMING"
    kind: str = "spark"


@dataclass
class ProcessSpec:
    """``process(ProcessFunction | KeyedProcessFunction | callable)``; ``keyed`` if after key_by."""

    fn: Any
    key_selector: KeySelectorSpec | None = None
    kind: str = "process"


@dataclass
class ReduceSpec:
    """Keyed ``reduce(fn)``. STREAMING: emit the updated value for every input record.
    BATCH: emit the final value of each key at end of input."""

    fn: Callable[[Any, Any], Any]
    key_selector: KeySelectorSpec
    runtime_mode: RuntimeMode = "STREAMING"
    kind: str = "reduce"


@dataclass
class AggregateSpec:
    """Keyed ``sum(field)`` / ``min(field)`` / ``max(field)``, Flink's and PyFlink's semantics: the
    emitted record is the key's first record with ``field`` replaced by the aggregate (``min_by``
    / ``max_by`` are a reduce that keeps the whole record). Vectorized over Arrow batches."""

    agg: Literal["sum", "min", "max"]
    field: Field
    key_selector: KeySelectorSpec
    runtime_mode: RuntimeMode = "STREAMING"
    kind: str = "aggregate"


# ----------------------------------------------------------------------------- sinks
@dataclass
class FileSinkSpec:
    """``sink_to(FileSink(path, format=...))``: one file per subtask,
    ``<path>/part-<subtask>-0.<ext>``; jsonl writes a tuple as a JSON array, a dict as an object."""

    path: str
    format: Literal["jsonl", "parquet", "csv", "text"]  # text: str(record) per line
    storage_options: dict[str, Any] = field(default_factory=dict)
    kind: str = "sink"
    #: part files are ``<part_prefix>-<subtask>-<n><part_suffix>`` (None: ``.<format's extension>``)
    part_prefix: str = "part"
    part_suffix: str | None = None


@dataclass
class PrintSinkSpec:
    """``print()``: one line per record on the TaskExecutor's stdout, prefixed ``"{i+1}> "``
    when parallelism > 1 (as Flink)."""

    prefix: str | None = None
    kind: str = "sink"


@dataclass
class CollectSinkSpec:
    """``execute_and_collect()``: batches go to the JobMaster through ``ctx.send_to_coordinator``
    and back to the client with the job result."""

    kind: str = "sink"


@dataclass
class DiscardingSinkSpec:
    """``sink_to(DiscardingSink())``: drops every record (Flink's DiscardingSink; benchmarks)."""

    kind: str = "sink"


# ----------------------------------------------------------------------------- keys
@dataclass
class KeySelectorSpec:
    """``key_by(x)``: x is a Field (vectorized path) or a callable record -> key."""

    field: Field | None = None
    fn: Callable[[Any], Any] | None = None

    def describe(self) -> str:
        if self.fn is not None:
            return getattr(self.fn, "__name__", "KeySelector")
        return f"field {self.field!r}"


Partitioning = Literal["forward", "rebalance", "shuffle", "broadcast", "hash", "rescale"]
