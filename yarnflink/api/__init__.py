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
    )
    from yarnflink.api.connectors import FileSink, FileSource
    from yarnflink.api.datastream import DataStream, DataStreamSink, KeyedStream
    from yarnflink.api.environment import (
        PlanCaptureExecutor,
        StreamExecutionEnvironment,
        get_default_executor,
        set_default_executor,
    )
    from yarnflink.api.windowing import WindowedStream
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
        ),
        "yarnflink.api.connectors": ("FileSink", "FileSource"),
        "yarnflink.api.datastream": ("DataStream", "DataStreamSink", "KeyedStream"),
        "yarnflink.api.environment": (
            "PlanCaptureExecutor",
            "StreamExecutionEnvironment",
            "get_default_executor",
            "set_default_executor",
        ),
        "yarnflink.api.windowing": ("WindowedStream",),
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
            "EventTimeSessionWindows",
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
            "Types",
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
]
