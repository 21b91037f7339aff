"""Output types (``output_type=Types.ROW_NAMED(...)``): the user's function wrapped so that its
results become records of that type (``TypeInformation.from_python``), as PyFlink's serializers
make them. The wrapper keeps the function's ``open``/``close``/``on_timer`` and everything else
(attributes are delegated), so the operators treat it as the user's function."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from yarnflink.common.typeinfo import TypeInformation, needs_conversion


def _convert_all(type_info: TypeInformation, results: Any) -> Any:
    if results is None or not hasattr(results, "__iter__"):
        return results  # the operator reports what is wrong with it
    return [type_info.from_python(r) for r in results]


class TypedFunction:
    """``fn`` (a callable or a function object with ``method``) whose results are converted:
    one result (``single``) or an iterable of them."""

    def __init__(self, fn: Any, method: str, type_info: TypeInformation, *, single: bool):
        self._fn = fn
        self._method = method
        self._type_info = type_info
        self._single = single
        bound = getattr(fn, method, None)
        self._call = bound if callable(bound) and not isinstance(fn, type) else fn
        self._has_method = self._call is not fn

    def _convert(self, result: Any) -> Any:
        if self._single:
            return self._type_info.from_python(result)
        return _convert_all(self._type_info, result)

    def __call__(self, *args: Any) -> Any:
        return self._convert(self._call(*args))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if name == self._method:
            if not self._has_method:
                raise AttributeError(name)  # a plain callable stays a plain callable
            return self.__call__
        if name == "on_timer":
            on_timer = getattr(self._fn, "on_timer", None)
            if on_timer is None:
                raise AttributeError(name)
            return lambda *args: _convert_all(self._type_info, on_timer(*args))
        return getattr(self._fn, name)

    def __repr__(self) -> str:
        return f"{self._fn!r} -> {self._type_info!r}"


def typed(fn: Any, method: str, type_info: TypeInformation | None, *, single: bool) -> Any:
    """``fn`` itself when its results need no conversion, else a ``TypedFunction``."""
    if type_info is None or not needs_conversion(type_info):
        return fn
    return TypedFunction(fn, method, type_info, single=single)


class ConvertingWindowFunction:
    """A ProcessWindowFunction that passes the window's result(s) on, converted: used when a
    window ``reduce`` / ``aggregate`` has an ``output_type`` but no window function."""

    def __init__(self, type_info: TypeInformation):
        self._type_info = type_info

    def process(self, key: Any, context: Any, elements: Iterable[Any]) -> list[Any]:
        return [self._type_info.from_python(e) for e in elements]
