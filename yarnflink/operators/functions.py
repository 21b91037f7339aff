"""User-function base classes (PyFlink's ``pyflink.datastream.functions``, minimal).

Plain callables work everywhere; these classes are for users who need ``open``/``close`` or a
context. ``yarnflink.api`` re-exports them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from yarnflink.operators.base import OperatorContext


class Subscriptable:
    """PyFlink's function classes are generic (``ProcessWindowFunction[tuple, tuple, str, TimeWindow]``,
    ``ProcessWindowFunction.Context[TimeWindow]``); subscripting gives the class itself, since
    the type parameters only document what flows through."""

    def __class_getitem__(cls, params: Any) -> Any:
        return cls


class RuntimeContext:
    """What a function may know about the parallel instance running it (PyFlink's
    ``RuntimeContext``)."""

    def __init__(self, ctx: OperatorContext):
        self._ctx = ctx

    def get_task_name(self) -> str:
        return self._ctx.task_name

    def get_task_name_with_subtasks(self) -> str:
        return f"{self._ctx.task_name} ({self._ctx.subtask_index + 1}/{self._ctx.parallelism})"

    def get_number_of_parallel_subtasks(self) -> int:
        return self._ctx.parallelism

    def get_max_number_of_parallel_subtasks(self) -> int:
        return self._ctx.max_parallelism

    def get_index_of_this_subtask(self) -> int:
        return self._ctx.subtask_index

    def get_attempt_number(self) -> int:
        return self._ctx.attempt_number

    def get_job_parameter(self, key: str, default_value: str | None = None) -> str | None:
        return self._ctx.config.get(key, default_value)

    def get_operator_name(self) -> str:
        return self._ctx.operator_name

    # keyed state (yarnflink.state): a keyed operator sets ``_keyed_backend``
    def _keyed_state(self, state_descriptor: Any, kind: str, method: str) -> Any:
        backend = getattr(self, "_keyed_backend", None)
        if backend is None:
            raise RuntimeError(
                f"{method}({state_descriptor!r}): keyed state is only available in a function "
                "applied after key_by() (e.g. a KeyedProcessFunction)"
            )
        if getattr(state_descriptor, "kind", None) != kind:
            raise TypeError(f"{method}() needs a {kind} state descriptor, got {state_descriptor!r}")
        return backend.get_partitioned_state(state_descriptor)

    def get_state(self, state_descriptor: Any) -> Any:
        return self._keyed_state(state_descriptor, "value", "get_state")

    def get_list_state(self, state_descriptor: Any) -> Any:
        return self._keyed_state(state_descriptor, "list", "get_list_state")

    def get_map_state(self, state_descriptor: Any) -> Any:
        return self._keyed_state(state_descriptor, "map", "get_map_state")

    def get_reducing_state(self, state_descriptor: Any) -> Any:
        return self._keyed_state(state_descriptor, "reducing", "get_reducing_state")

    def get_aggregating_state(self, state_descriptor: Any) -> Any:
        return self._keyed_state(state_descriptor, "aggregating", "get_aggregating_state")


class Function(Subscriptable):
    """Base of all rich functions: ``open(runtime_context)`` before the first record,
    ``close()`` after the last."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Iterable[Any]:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class ReduceFunction(Function):
    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class KeySelector(Function):
    def get_key(self, value: Any) -> Any:
        raise NotImplementedError


class TimerService:
    """Timers are not supported yet; every method raises."""

    def current_processing_time(self) -> int:
        return int(time.time() * 1000)

    def current_watermark(self) -> int:
        return -(2**63)

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("timers are not supported yet")

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("timers are not supported yet")


class ProcessFunction(Function):
    """``process_element(value, ctx)`` returns an iterable of outputs or yields them."""

    class Context(Subscriptable):
        def __init__(self) -> None:
            self._timer_service = TimerService()

        def timestamp(self) -> int | None:
            return None

        def timer_service(self) -> TimerService:
            return self._timer_service

    def process_element(self, value: Any, ctx: ProcessFunction.Context) -> Iterable[Any]:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """Like ProcessFunction, after ``key_by``; ``ctx.get_current_key()`` is the record's key."""

    class Context(ProcessFunction.Context):
        def __init__(self) -> None:
            super().__init__()
            self._current_key: Any = None

        def get_current_key(self) -> Any:
            return self._current_key

    def process_element(self, value: Any, ctx: KeyedProcessFunction.Context) -> Iterable[Any]:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        return ()


class BroadcastProcessFunction(Function):
    """``ds.connect(rules.broadcast(descriptor)).process(fn)`` on a non-keyed stream:
    ``process_element(value, ctx)`` with read-only broadcast state
    (``ctx.get_broadcast_state(descriptor)``), ``process_broadcast_element(value, ctx)`` with
    writable broadcast state; both return or yield outputs (``yarnflink.operators.broadcast``)."""

    class Context(Subscriptable):
        """``ctx`` of ``process_broadcast_element``: ``timestamp()``, ``current_processing_time()``,
        ``current_watermark()``, ``get_broadcast_state(descriptor)`` (writable)."""

    class ReadOnlyContext(Subscriptable):
        """``ctx`` of ``process_element``: the same, with read-only broadcast state."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError


class KeyedBroadcastProcessFunction(Function):
    """As BroadcastProcessFunction on a keyed stream (``ks.connect(rules.broadcast(d))``):
    ``process_element`` and ``on_timer`` also have keyed state, ``ctx.timer_service()`` and
    ``ctx.get_current_key()``."""

    class Context(Subscriptable):
        """``ctx`` of ``process_broadcast_element`` (writable broadcast state, no key)."""

    class ReadOnlyContext(Subscriptable):
        """``ctx`` of ``process_element``: key, timers, read-only broadcast state."""

    class OnTimerContext(Subscriptable):
        """``ctx`` of ``on_timer``: as ReadOnlyContext, and ``time_domain()``."""

    def process_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError

    def process_broadcast_element(self, value: Any, ctx: Any) -> Iterable[Any]:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        return ()
