"""User-function base classes (PyFlink's ``pyflink.datastream.functions``, minimal).

Plain callables work everywhere; these classes are for users who need ``open``/``close`` or a
context. ``yarnflink.api`` re-exports them.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from yarnflink.operators.base import OperatorContext


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

    def get_job_parameter(self, key: str, default_value: Optional[str] = None) -> Optional[str]:
        return self._ctx.config.get(key, default_value)

    def get_operator_name(self) -> str:
        return self._ctx.operator_name


class Function:
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
        import time

        return int(time.time() * 1000)

    def current_watermark(self) -> int:
        return -(2**63)

    def register_processing_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("timers are not supported yet")

    def register_event_time_timer(self, timestamp: int) -> None:
        raise NotImplementedError("timers are not supported yet")


class ProcessFunction(Function):
    """``process_element(value, ctx)`` returns an iterable of outputs or yields them."""

    class Context:
        def __init__(self) -> None:
            self._timer_service = TimerService()

        def timestamp(self) -> Optional[int]:
            return None

        def timer_service(self) -> TimerService:
            return self._timer_service

    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Iterable[Any]:
        raise NotImplementedError


class KeyedProcessFunction(Function):
    """Like ProcessFunction, after ``key_by``; ``ctx.get_current_key()`` is the record's key."""

    class Context(ProcessFunction.Context):
        def __init__(self) -> None:
            super().__init__()
            self._current_key: Any = None

        def get_current_key(self) -> Any:
            return self._current_key

    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Iterable[Any]:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        return ()
