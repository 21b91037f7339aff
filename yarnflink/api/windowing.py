"""``WindowedStream`` (``key_by(...).window(assigner)``) of the DataStream API (PyFlink's names).
The window operator's streams (and its late-data side output) are made by the KeyedStream it
windows (``yarnflink.api.datastream``), which this module knows only as a type."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yarnflink.api.typed import ConvertingWindowFunction, TypedFunction
from yarnflink.common.typeinfo import check_type_info, needs_conversion
from yarnflink.operators.window_columns import FieldAggregator
from yarnflink.operators.windows import OutputTag, WindowAssigner, WindowSpec
from yarnflink.state.descriptors import check_aggregate_function, to_millis

if TYPE_CHECKING:
    from yarnflink.api.datastream import DataStream, KeyedStream


def _describe(obj: Any) -> str:
    return f"{type(obj).__name__} {obj!r}"


class WindowedStream:
    """Windows of a KeyedStream; ``reduce`` / ``aggregate`` / ``process`` / ``apply`` create the
    window operator."""

    def __init__(self, keyed: KeyedStream, assigner: WindowAssigner):
        if not isinstance(assigner, WindowAssigner):
            raise TypeError(
                "window() needs a window assigner such as TumblingEventTimeWindows.of(Time.seconds(5)), "
                f"got {_describe(assigner)}"
            )
        self._keyed = keyed
        self._assigner = assigner
        self._lateness_ms = 0
        self._late_tag: OutputTag | None = None

    def allowed_lateness(self, time: Any) -> WindowedStream:
        ms = to_millis(time, "allowed_lateness()")
        if ms < 0:
            raise ValueError(f"allowed_lateness() must not be negative, got {ms} ms")
        if ms and not self._assigner.is_event_time():
            raise ValueError("allowed_lateness() only applies to event-time windows")
        self._lateness_ms = ms
        return self

    def side_output_late_data(self, output_tag: OutputTag) -> WindowedStream:
        if not isinstance(output_tag, OutputTag):
            raise TypeError(f"side_output_late_data() needs an OutputTag, got {_describe(output_tag)}")
        self._late_tag = output_tag
        return self

    def trigger(self, trigger: Any) -> WindowedStream:
        raise NotImplementedError(
            "custom window triggers are not supported yet (the assigner's default trigger is used)"
        )

    def evictor(self, evictor: Any) -> WindowedStream:
        raise NotImplementedError("window evictors are not supported yet")

    # ------------------------------------------------------------------ window functions
    def reduce(self, reduce_function: Any, window_function: Any = None, output_type: Any = None) -> DataStream:
        fn = getattr(reduce_function, "reduce", None)
        if not callable(fn) and not callable(reduce_function):
            raise TypeError(
                f"reduce() needs a function (a, b) -> c or a ReduceFunction, got {_describe(reduce_function)}"
            )
        wfn = _window_fn(window_function, optional=True)
        if wfn is None and output_type is None:
            return self._result("reduce", reduce_function, None, self._keyed._t.output_type)
        return self._typed_result("reduce", reduce_function, wfn, output_type)

    def aggregate(
        self,
        aggregate_function: Any,
        window_function: Any = None,
        accumulator_type: Any = None,
        output_type: Any = None,
    ) -> DataStream:
        check_aggregate_function(aggregate_function, "aggregate()")
        if self._assigner.merging and not callable(getattr(type(aggregate_function), "merge", None)):
            raise TypeError("aggregate() on session windows needs an AggregateFunction with merge()")
        return self._typed_result(
            "aggregate", aggregate_function, _window_fn(window_function, optional=True), output_type
        )

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        """Per key and window, the first record with the field ``position_to_sum`` (a tuple
        position or field name) replaced by the field's sum over the window (Flink's
        ``WindowedStream.sum``). Vectorized on Arrow batches for tumbling and sliding event-time
        windows (``yarnflink.operators.window_columns``)."""
        return self._field_aggregation("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        """As ``sum``, with the field's minimum."""
        return self._field_aggregation("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        """As ``sum``, with the field's maximum."""
        return self._field_aggregation("max", position_to_max)

    def _field_aggregation(self, agg: str, field: Any) -> DataStream:
        if (
            isinstance(field, bool)
            or not isinstance(field, (int, str))
            or field == ""
            or (isinstance(field, int) and field < 0)
        ):
            raise TypeError(
                f"{agg}(): the field must be a tuple position (int >= 0) or a field name (str), got {field!r}"
            )
        return self._result("reduce", FieldAggregator(agg, field), None)

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        if not callable(getattr(process_window_function, "process", None)) or isinstance(process_window_function, type):
            raise TypeError(
                f"process() needs a ProcessWindowFunction instance, got {_describe(process_window_function)}"
            )
        return self._typed_result("process", None, process_window_function, output_type)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        return self._typed_result("apply", None, _window_fn(window_function, optional=False), output_type)

    def _typed_result(self, kind: str, function: Any, window_function: Any, output_type: Any) -> DataStream:
        out = check_type_info(output_type, f"{kind}()")
        if out is not None and needs_conversion(out):
            if window_function is None:
                window_function = ConvertingWindowFunction(out)
            else:
                method = "apply" if callable(getattr(window_function, "apply", None)) else "process"
                window_function = TypedFunction(window_function, method, out, single=False)
        return self._result(kind, function, window_function, out)

    def _result(self, kind: str, function: Any, window_function: Any, output_type: Any = None) -> DataStream:
        spec = WindowSpec(
            assigner=self._assigner,
            key_selector=self._keyed.get_key_selector(),
            function_kind=kind,
            function=function,
            window_function=window_function,
            allowed_lateness_ms=self._lateness_ms,
            late_data_tag=self._late_tag.tag_id if self._late_tag is not None else None,
        )
        name = f"Window({self._assigner!r}, {kind})"
        window_t = self._keyed._add(name, spec)
        window_t.output_type = output_type
        return self._keyed._stream_of(window_t, with_side_outputs=self._late_tag is not None)


def _window_fn(fn: Any, optional: bool) -> Any:
    if fn is None:
        if optional:
            return None
        raise TypeError("apply() needs a WindowFunction")
    if isinstance(fn, type):
        raise TypeError(f"a window function must be an instance, got the class {fn.__name__}")
    if callable(getattr(fn, "process", None)) or callable(getattr(fn, "apply", None)) or callable(fn):
        return fn
    raise TypeError(f"expected a ProcessWindowFunction or WindowFunction, got {_describe(fn)}")
