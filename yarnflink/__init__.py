"""yarnflink: a Python reimplementation of Apache Flink's runtime with PyFlink's DataStream API.

    from yarnflink import StreamExecutionEnvironment, RuntimeExecutionMode, FileSource, FileSink
"""

from yarnflink.api import (
    DataStream,
    DataStreamSink,
    FileSink,
    FileSource,
    JobExecutionResult,
    KeyedStream,
    RuntimeExecutionMode,
    SlotSharingGroup,
    StreamExecutionEnvironment,
)
from yarnflink.api.connectors import DiscardingSink
from yarnflink.common.config import Configuration
from yarnflink.operators.functions import (
    FilterFunction,
    FlatMapFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
)

__all__ = [
    "Configuration",
    "DataStream",
    "DataStreamSink",
    "DiscardingSink",
    "FileSink",
    "FileSource",
    "FilterFunction",
    "FlatMapFunction",
    "JobExecutionResult",
    "KeyedProcessFunction",
    "KeyedStream",
    "KeySelector",
    "MapFunction",
    "ProcessFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SlotSharingGroup",
    "StreamExecutionEnvironment",
]
