"""PyFlink's DataStream API vocabulary."""

from yarnflink.api.common import (
    ExecutorNotConfiguredError,
    JobClient,
    JobExecutionResult,
    PipelineExecutor,
    ProgramAbortException,
    RuntimeExecutionMode,
    SlotSharingGroup,
)
from yarnflink.api.connectors import FileSink, FileSource
from yarnflink.api.datastream import DataStream, DataStreamSink, KeyedStream
from yarnflink.api.environment import (
    PlanCaptureExecutor,
    StreamExecutionEnvironment,
    get_default_executor,
    set_default_executor,
)
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
    "DataStream",
    "DataStreamSink",
    "ExecutorNotConfiguredError",
    "FileSink",
    "FileSource",
    "FilterFunction",
    "FlatMapFunction",
    "JobClient",
    "JobExecutionResult",
    "KeyedProcessFunction",
    "KeySelector",
    "KeyedStream",
    "MapFunction",
    "PipelineExecutor",
    "PlanCaptureExecutor",
    "ProcessFunction",
    "ProgramAbortException",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SlotSharingGroup",
    "StreamExecutionEnvironment",
    "get_default_executor",
    "set_default_executor",
]
