"""yarnflink: a Python reimplementation of Apache Flink's runtime with PyFlink's DataStream API.

from yarnflink import StreamExecutionEnvironment, RuntimeExecutionMode, FileSource, FileSink
"""

# First: registers every configuration option, so that Configuration knows them all.
import yarnflink.options  # noqa: F401
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
from yarnflink.api.windowing import WindowedStream
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
from yarnflink.operators.timers import TimeDomain
from yarnflink.operators.watermarks import Duration, TimestampAssigner, Watermark, WatermarkStrategy
from yarnflink.operators.windows import (
    EventTimeSessionWindows,
    OutputTag,
    ProcessingTimeSessionWindows,
    ProcessWindowFunction,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    Time,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowFunction,
)
from yarnflink.state.descriptors import (
    AggregateFunction,
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
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
    # state and event time
    "AggregateFunction",
    "AggregatingStateDescriptor",
    "Duration",
    "EventTimeSessionWindows",
    "ListStateDescriptor",
    "MapStateDescriptor",
    "OutputTag",
    "ProcessWindowFunction",
    "ProcessingTimeSessionWindows",
    "ReducingStateDescriptor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "StateTtlConfig",
    "Time",
    "TimeDomain",
    "TimeWindow",
    "TimestampAssigner",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Types",
    "ValueStateDescriptor",
    "Watermark",
    "WatermarkStrategy",
    "WindowFunction",
    "WindowedStream",
]
