"""``WindowedStream`` (``key_by(...).window(assigner)``) and the side-output plumbing of the
DataStream API (PyFlink's names).

Side outputs without graph support: an operator with side outputs emits side records wrapped in
``SideOutputRecord`` in its one output stream; its main output is that stream through a chained
``SideOutputSelectOperator`` that drops them, and ``get_side_output(tag)`` adds one that keeps
(and unwraps) the records of that tag. The selector is only added when a side output is declared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yarnflink.api.transformations import Input, Transformation
from yarnflink.operators.windows import (
    OutputTag,
    SideOutputSelectSpec,
    WindowAssigner,
    WindowSpec,
)
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
        return self._result("reduce", reduce_function, _window_fn(window_function, optional=True))

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
        return self._result("aggregate", aggregate_function, _window_fn(window_function, optional=True))

    def process(self, process_window_function: Any, output_type: Any = None) -> DataStream:
        if not callable(getattr(process_window_function, "process", None)) or isinstance(process_window_function, type):
            raise TypeError(
                f"process() needs a ProcessWindowFunction instance, got {_describe(process_window_function)}"
            )
        return self._result("process", None, process_window_function)

    def apply(self, window_function: Any, output_type: Any = None) -> DataStream:
        return self._result("apply", None, _window_fn(window_function, optional=False))

    def _result(self, kind: str, function: Any, window_function: Any) -> DataStream:
        from yarnflink.api.datastream import DataStream

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
        if self._late_tag is None:
            return DataStream(self._keyed._env, window_t)
        env = self._keyed._env
        main_t = env._add_transformation("Main Output", SideOutputSelectSpec(None), "operator", [Input(window_t)])
        return SideOutputStream(env, main_t, window_t)


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


def side_output(stream: DataStream, output_tag: OutputTag) -> DataStream:
    """``stream.get_side_output(tag)``: the records the operator of ``stream`` sent to ``tag``."""
    from yarnflink.api.datastream import DataStream

    if not isinstance(output_tag, OutputTag):
        raise TypeError(f"get_side_output() needs an OutputTag, got {_describe(output_tag)}")
    producer = stream._side_output_producer()
    env = stream._env
    t = env._add_transformation(
        f"Side Output '{output_tag.tag_id}'", SideOutputSelectSpec(output_tag.tag_id), "operator", [Input(producer)]
    )
    t.parallelism = producer.parallelism
    return DataStream(env, t)


def _make_side_output_stream_class() -> type:
    from yarnflink.api.datastream import DataStream

    class SideOutputStream(DataStream):
        """The main output of an operator with side outputs: operator settings apply to the
        producing operator (and to the chained selector, so that they stay chained)."""

        def __init__(self, env: Any, main: Transformation, producer: Transformation):
            super().__init__(env, main)
            self._producer = producer

        def _side_output_producer(self) -> Transformation:
            return self._producer

        def _both(self, method: str, *args: Any) -> Any:
            getattr(DataStream(self._env, self._producer), method)(*args)
            getattr(DataStream(self._env, self._t), method)(*args)
            return self

        def set_parallelism(self, parallelism: int) -> Any:
            return self._both("set_parallelism", parallelism)

        def set_max_parallelism(self, max_parallelism: int) -> Any:
            return self._both("set_max_parallelism", max_parallelism)

        def force_non_parallel(self) -> Any:
            return self._both("force_non_parallel")

        def slot_sharing_group(self, slot_sharing_group: Any) -> Any:
            return self._both("slot_sharing_group", slot_sharing_group)

        def name(self, name: str) -> Any:
            DataStream(self._env, self._producer).name(name)
            return self

        def uid(self, uid: str) -> Any:
            DataStream(self._env, self._producer).uid(uid)
            DataStream(self._env, self._t).uid(f"{uid}-main-output")
            return self

        def disable_chaining(self) -> Any:
            DataStream(self._env, self._producer).disable_chaining()
            return self

        def start_new_chain(self) -> Any:
            DataStream(self._env, self._producer).start_new_chain()
            return self

    return SideOutputStream


class _Lazy:
    cls: type | None = None


def SideOutputStream(env: Any, main: Transformation, producer: Transformation) -> DataStream:  # noqa: N802
    if _Lazy.cls is None:
        _Lazy.cls = _make_side_output_stream_class()
    return _Lazy.cls(env, main, producer)
