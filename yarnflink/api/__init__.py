"""PyFlink's DataStream API vocabulary."""

from typing import TYPE_CHECKING

from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
    from yarnflink.api.common import (
        ExecutorNotConfiguredError,
        JobClient,
        JobExecutionResult,
        PipelineExecutor,
        ProgramAbortException,
        RuntimeExecutionMode,
        SlotSharingGroup,
        UnsupportedFeatureError,
    )
    from yarnflink.api.connectors import (
        Encoder,
        FileSink,
        FileSource,
        NumberSequenceSource,
        OutputFileConfig,
        ParquetBulkWriters,
        ParquetColumnarRowInputFormat,
        RollingPolicy,
        Source,
        StreamFormat,
    )
    from yarnflink.api.datastream import DataStream, DataStreamSink, KeyedStream
    from yarnflink.api.environment import (
        PlanCaptureExecutor,
        StreamExecutionEnvironment,
        get_default_executor,
        set_default_executor,
    )
    from yarnflink.api.window_adapters import CountWindow, EventTimeSessionWindows, SessionWindowTimeGapExtractor
    from yarnflink.api.windowing import WindowedStream
    from yarnflink.common.row import Row, RowKind
    from yarnflink.common.typeinfo import TypeInformation, Types
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
        ValueStateDescriptor,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.api.common": (
            "ExecutorNotConfiguredError",
            "JobClient",
            "JobExecutionResult",
            "PipelineExecutor",
            "ProgramAbortException",
            "RuntimeExecutionMode",
            "SlotSharingGroup",
            "UnsupportedFeatureError",
        ),
        "yarnflink.api.connectors": (
            "Encoder",
            "FileSink",
            "FileSource",
            "NumberSequenceSource",
            "OutputFileConfig",
            "ParquetBulkWriters",
            "ParquetColumnarRowInputFormat",
            "RollingPolicy",
            "Source",
            "StreamFormat",
        ),
        "yarnflink.api.datastream": ("DataStream", "DataStreamSink", "KeyedStream"),
        "yarnflink.api.environment": (
            "PlanCaptureExecutor",
            "StreamExecutionEnvironment",
            "get_default_executor",
            "set_default_executor",
        ),
        "yarnflink.api.window_adapters": ("CountWindow", "EventTimeSessionWindows", "SessionWindowTimeGapExtractor"),
        "yarnflink.api.windowing": ("WindowedStream",),
        "yarnflink.common.row": ("Row", "RowKind"),
        "yarnflink.common.typeinfo": ("TypeInformation", "Types"),
        "yarnflink.operators.functions": (
            "FilterFunction",
            "FlatMapFunction",
            "KeyedProcessFunction",
            "KeySelector",
            "MapFunction",
            "ProcessFunction",
            "ReduceFunction",
            "RuntimeContext",
        ),
        "yarnflink.operators.timers": ("TimeDomain",),
        "yarnflink.operators.watermarks": ("Duration", "TimestampAssigner", "Watermark", "WatermarkStrategy"),
        "yarnflink.operators.windows": (
            "OutputTag",
            "ProcessingTimeSessionWindows",
            "ProcessWindowFunction",
            "SlidingEventTimeWindows",
            "SlidingProcessingTimeWindows",
            "Time",
            "TimeWindow",
            "TumblingEventTimeWindows",
            "TumblingProcessingTimeWindows",
            "WindowFunction",
        ),
        "yarnflink.state.descriptors": (
            "AggregateFunction",
            "AggregatingStateDescriptor",
            "ListStateDescriptor",
            "MapStateDescriptor",
            "ReducingStateDescriptor",
            "StateTtlConfig",
            "ValueStateDescriptor",
        ),
    },
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
    "UnsupportedFeatureError",
    # connectors
    "Encoder",
    "NumberSequenceSource",
    "OutputFileConfig",
    "ParquetBulkWriters",
    "ParquetColumnarRowInputFormat",
    "RollingPolicy",
    "Source",
    "StreamFormat",
    # records and types
    "Row",
    "RowKind",
    "TypeInformation",
    # count and dynamic-gap session windows
    "CountWindow",
    "SessionWindowTimeGapExtractor",
]
