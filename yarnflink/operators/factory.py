"""Spec -> running operator (TaskExecutor side)."""

from __future__ import annotations

import cloudpickle

from yarnflink.operators import specs as S
from yarnflink.operators.base import StreamOperator
from yarnflink.operators.broadcast import BroadcastProcessOperator, BroadcastProcessSpec
from yarnflink.operators.keyed import AggregateOperator, ReduceOperator
from yarnflink.operators.partitioners import ChannelWriter, NetworkOutput
from yarnflink.operators.sinks import CollectSink, DiscardingSink, FileSink, PrintSink
from yarnflink.operators.sources import CollectionSource, FileSource, SequenceSource
from yarnflink.operators.spark import SparkOperator
from yarnflink.operators.timers import create_process_operator
from yarnflink.operators.transforms import (
    FilterOperator,
    FlatMapOperator,
    MapBatchesOperator,
    MapOperator,
)
from yarnflink.operators.watermarks import TimestampsAndWatermarksOperator, TimestampsAndWatermarksSpec
from yarnflink.operators.windows import SideOutputSelectOperator, SideOutputSelectSpec, WindowOperator, WindowSpec

OPERATORS: dict[type, type] = {
    S.CollectionSourceSpec: CollectionSource,
    S.SequenceSourceSpec: SequenceSource,
    S.FileSourceSpec: FileSource,
    S.MapSpec: MapOperator,
    S.FlatMapSpec: FlatMapOperator,
    S.FilterSpec: FilterOperator,
    S.MapBatchesSpec: MapBatchesOperator,
    S.SparkSpec: SparkOperator,
    S.ProcessSpec: create_process_operator,  # type: ignore[dict-item]  # keyed: state and timers
    S.ReduceSpec: ReduceOperator,
    S.AggregateSpec: AggregateOperator,
    S.FileSinkSpec: FileSink,
    S.PrintSinkSpec: PrintSink,
    S.CollectSinkSpec: CollectSink,
    S.DiscardingSinkSpec: DiscardingSink,
    TimestampsAndWatermarksSpec: TimestampsAndWatermarksOperator,
    WindowSpec: WindowOperator,
    SideOutputSelectSpec: SideOutputSelectOperator,
    BroadcastProcessSpec: BroadcastProcessOperator,
}


def create_operator(spec) -> StreamOperator:
    """A new (not yet opened) operator for ``spec``. Its ``output`` is set by the chain."""
    cls = OPERATORS.get(type(spec))
    if cls is None:
        for spec_type, op_type in OPERATORS.items():  # subclasses of known specs
            if isinstance(spec, spec_type):
                cls = op_type
                break
    if cls is None:
        raise TypeError(f"no operator for spec {type(spec).__name__}")
    return cls(spec)


def create_partitioner_output(
    writer: ChannelWriter,
    partitioning: str,
    num_channels: int,
    key_selector: S.KeySelectorSpec | None,
    max_parallelism: int,
    subtask_index: int,
    batch_rows: int = 65536,
    buffer_timeout_s: float = 0.1,
    producer_parallelism: int | None = None,
) -> NetworkOutput:
    """The Output at a chain's end for one output data set (see ``partitioners.NetworkOutput``).
    ``key_selector`` may also be given as the cloudpickled bytes of a JobEdge."""
    if isinstance(key_selector, (bytes, bytearray)):
        key_selector = cloudpickle.loads(key_selector)
    return NetworkOutput(
        writer,
        partitioning,
        num_channels,
        key_selector,
        max_parallelism,
        subtask_index,
        batch_rows=batch_rows,
        buffer_timeout_s=buffer_timeout_s,
        producer_parallelism=producer_parallelism,
    )
