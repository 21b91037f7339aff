"""``pyflink.datastream.window``: window assigners and windows. Count windows
(``KeyedStream.count_window``) and ``EventTimeSessionWindows.with_dynamic_gap`` are supported;
custom triggers and evictors are refused (``WindowedStream.trigger`` / ``evictor``)."""

from yarnflink.api.window_adapters import (
    CountSlidingWindowAssigner,
    CountTumblingWindowAssigner,
    CountWindow,
    DynamicEventTimeSessionWindows,
    EventTimeSessionWindows,
    GlobalWindow,
    SessionWindowTimeGapExtractor,
)
from yarnflink.operators.windows import (
    ProcessingTimeSessionWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TimeWindow,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
    WindowAssigner,
)

Window = TimeWindow  # PyFlink's base of windows; yarnflink's time windows are the ones assigners make

__all__ = [
    "CountSlidingWindowAssigner",
    "CountTumblingWindowAssigner",
    "CountWindow",
    "DynamicEventTimeSessionWindows",
    "EventTimeSessionWindows",
    "GlobalWindow",
    "ProcessingTimeSessionWindows",
    "SessionWindowTimeGapExtractor",
    "SlidingEventTimeWindows",
    "SlidingProcessingTimeWindows",
    "TimeWindow",
    "TumblingEventTimeWindows",
    "TumblingProcessingTimeWindows",
    "Window",
    "WindowAssigner",
]
