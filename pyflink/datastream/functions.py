"""``pyflink.datastream.functions``: the function classes (generic as PyFlink's, e.g.
``ProcessWindowFunction[tuple, tuple, str, TimeWindow]``). Classes for features yarnflink refuses
(connected streams, broadcast state, all-window functions) exist so that programs import; the call
that would use them raises."""

from yarnflink.operators.functions import (
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedProcessFunction,
    KeySelector,
    MapFunction,
    ProcessFunction,
    ReduceFunction,
    RuntimeContext,
    TimerService,
)
from yarnflink.operators.windows import ProcessWindowFunction, WindowFunction
from yarnflink.state.descriptors import AggregateFunction


class CoMapFunction(Function):
    """Defined for imports; ``DataStream.connect()`` is refused."""


class CoFlatMapFunction(Function):
    """Defined for imports; ``DataStream.connect()`` is refused."""


class CoProcessFunction(Function):
    """Defined for imports; ``DataStream.connect()`` is refused."""


class KeyedCoProcessFunction(Function):
    """Defined for imports; ``DataStream.connect()`` is refused."""


class BroadcastProcessFunction(Function):
    """Defined for imports; ``DataStream.connect()`` is refused."""


class KeyedBroadcastProcessFunction(Function):
    """Defined for imports; ``DataStream.connect()`` is refused."""


class AllWindowFunction(Function):
    """Defined for imports; ``DataStream.window_all()`` is refused."""


class ProcessAllWindowFunction(Function):
    """Defined for imports; ``DataStream.window_all()`` is refused."""


class SourceFunction(Function):
    """Defined for imports; ``env.add_source()`` (a Java SourceFunction) is refused."""


class SinkFunction(Function):
    """Defined for imports; ``DataStream.add_sink()`` (a Java SinkFunction) is refused."""


class Partitioner(Function):
    """Defined for imports; ``DataStream.partition_custom()`` is refused."""


__all__ = [
    "AggregateFunction",
    "AllWindowFunction",
    "BroadcastProcessFunction",
    "CoFlatMapFunction",
    "CoMapFunction",
    "CoProcessFunction",
    "FilterFunction",
    "FlatMapFunction",
    "KeySelector",
    "KeyedBroadcastProcessFunction",
    "KeyedCoProcessFunction",
    "KeyedProcessFunction",
    "MapFunction",
    "Partitioner",
    "ProcessAllWindowFunction",
    "ProcessFunction",
    "ProcessWindowFunction",
    "ReduceFunction",
    "RuntimeContext",
    "SinkFunction",
    "SourceFunction",
    "TimerService",
    "WindowFunction",
]
