"""``pyflink.datastream.functions``: the function classes (generic as PyFlink's, e.g.
``ProcessWindowFunction[tuple, tuple, str, TimeWindow]``). Classes for features yarnflink refuses
(``SourceFunction``, ``SinkFunction``, ``Partitioner``) exist so that programs import; the call
that would use them raises."""

from collections.abc import Iterable
from typing import Any

from yarnflink.operators.functions import (
    BroadcastProcessFunction,
    FilterFunction,
    FlatMapFunction,
    Function,
    KeyedBroadcastProcessFunction,
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
    """``map1(value)`` / ``map2(value)`` of ``ds1.connect(ds2).map(...)``."""


class CoFlatMapFunction(Function):
    """``flat_map1(value)`` / ``flat_map2(value)`` of ``ds1.connect(ds2).flat_map(...)``."""


class CoProcessFunction(Function):
    """``process_element1(value, ctx)`` / ``process_element2(value, ctx)`` of ``connect(...).process(...)``."""

    Context = KeyedProcessFunction.Context


class KeyedCoProcessFunction(Function):
    """As CoProcessFunction, both streams keyed: keyed state and timers (``on_timer``) per key."""

    Context = KeyedProcessFunction.Context


class AllWindowFunction(Function):
    """``apply(window, inputs) -> iterable`` once per window of ``window_all``."""

    def apply(self, window: Any, inputs: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


class ProcessAllWindowFunction(Function):
    """``process(context, elements) -> iterable`` once per window of ``window_all``."""

    Context = ProcessWindowFunction.Context

    def process(self, context: Any, elements: Iterable[Any]) -> Iterable[Any]:
        raise NotImplementedError


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
