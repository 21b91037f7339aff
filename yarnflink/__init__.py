"""yarnflink: a Python reimplementation of Apache Flink's runtime with PyFlink's DataStream API.

from yarnflink import StreamExecutionEnvironment, RuntimeExecutionMode, FileSource, FileSink
"""

from typing import TYPE_CHECKING

# Registers every configuration option, so that Configuration knows them all; it imports only the
# packages' options modules. The public names below load on first use (``from yarnflink import X``
# works as before): a TaskExecutor or a CLI call does not pay for the whole DataStream API.
import yarnflink.options  # noqa: F401
from yarnflink.common.lazy import lazy_exports

if TYPE_CHECKING:  # the static view (mypy, import-linter); at run time they load on first use
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

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "yarnflink.api": (
            "DataStream",
            "DataStreamSink",
            "FileSink",
            "FileSource",
            "JobExecutionResult",
            "KeyedStream",
            "RuntimeExecutionMode",
            "SlotSharingGroup",
            "StreamExecutionEnvironment",
        ),
        "yarnflink.api.connectors": ("DiscardingSink",),
        "yarnflink.api.windowing": ("WindowedStream",),
        "yarnflink.common.config": ("Configuration",),
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
