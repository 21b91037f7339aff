"""``pyflink.datastream`` on yarnflink: the DataStream API (``yarnflink.api``)."""

import enum

from pyflink.datastream.functions import (
    AggregateFunction,
    BroadcastProcessFunction,
    CoFlatMapFunction,
    CoMapFunction,
    CoProcessFunction,
    FilterFunction,
    FlatMapFunction,
    KeyedBroadcastProcessFunction,
    KeyedCoProcessFunction,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    Partitioner,
    ProcessFunction,
    ProcessWindowFunction,
    ReduceFunction,
    RuntimeContext,
    SinkFunction,
    SourceFunction,
    TimerService,
    WindowFunction,
)
from pyflink.datastream.output_tag import OutputTag
from pyflink.datastream.window import CountWindow, GlobalWindow, TimeWindow, Window, WindowAssigner
from yarnflink.api.broadcast import BroadcastConnectedStream, BroadcastStream
from yarnflink.api.checkpoint_config import (
    CheckpointConfig,
    EmbeddedRocksDBStateBackend,
    FileSystemCheckpointStorage,
    HashMapStateBackend,
    JobManagerCheckpointStorage,
)
from yarnflink.api.common import RuntimeExecutionMode, SlotSharingGroup
from yarnflink.api.connected import ConnectedStreams
from yarnflink.api.datastream import DataStream, DataStreamSink, KeyedStream
from yarnflink.api.environment import StreamExecutionEnvironment
from yarnflink.api.windowing import WindowedStream
from yarnflink.operators.timers import TimeDomain


class CheckpointingMode(enum.Enum):
    """``env.enable_checkpointing(interval, CheckpointingMode.EXACTLY_ONCE)``."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1


__all__ = [
    "AggregateFunction",
    "CheckpointConfig",
    "EmbeddedRocksDBStateBackend",
    "FileSystemCheckpointStorage",
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "BroadcastConnectedStream",
    "BroadcastProcessFunction",
    "BroadcastStream",
    "CheckpointingMode",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "ConnectedStreams",
    "CountWindow",
    "DataStream",
    "DataStreamSink",
    "FilterFunction",
    "FlatMapFunction",
    "GlobalWindow",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "KeyedStream",
    "MapFunction",
    "OutputTag",
    "Partitioner",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "RuntimeExecutionMode",
    "SinkFunction",
    "SlotSharingGroup",
    "SourceFunction",
    "StreamExecutionEnvironment",
    "TimeDomain",
    "TimeWindow",
    "TimerService",
    "Window",
    "WindowAssigner",
    "WindowFunction",
    "WindowedStream",
]
