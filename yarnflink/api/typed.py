"""Output types (``output_type=Types.ROW_NAMED(...)``): the user's function wrapped so that its
results become records of that type (``TypeInformation.from_python``), as PyFlink's serializers
make them. The wrapper keeps the function's ``open``/``close``/``on_timer`` and everything else
(attributes are delegated), so the operators treat it as the user's function."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from yarnflink.common.typeinfo import TypeInformation, needs_conversion
from yarnflink.operators.windows import OutputTag, SideOutputRecord


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


class SideOutputsFunction(TypedFunction):
    """A process function whose results may go to side outputs, as PyFlink's do: a result
    ``(output_tag, value)`` becomes a ``SideOutputRecord`` for that tag (its value converted to the
    tag's type); the others are converted to ``type_info`` (None: kept as they are)."""

    def __init__(self, fn: Any, method: str, type_info: TypeInformation | None):
        super().__init__(fn, method, type_info, single=False)  # type: ignore[arg-type]
        #: the tags some get_side_output() asked for (set while the program is defined)
        self.wanted: set[str] = set()

    def _convert(self, result: Any) -> Any:
        if result is None or not hasattr(result, "__iter__"):
            return result
        out = []
        for r in result:
            # PyFlink's test exactly: a tuple whose first element is an OutputTag (its second is
            # the value, whatever follows)
            if isinstance(r, tuple) and r and isinstance(r[0], OutputTag):
                tag, value = r[0], r[1]
                if tag.tag_id in self.wanted:  # Flink drops side outputs nobody reads
                    tag_type = tag.type_info if isinstance(tag.type_info, TypeInformation) else None
                    out.append(SideOutputRecord(tag.tag_id, tag_type.from_python(value) if tag_type else value))
            else:
                out.append(self._type_info.from_python(r) if self._type_info is not None else r)
        return out

    def __getattr__(self, name: str) -> Any:
        if name in ("on_timer", "process_broadcast_element"):  # results of these convert alike
            method = getattr(self._fn, name, None)
            if method is None:
                raise AttributeError(name)
            return lambda *args: self._convert(method(*args))
        return super().__getattr__(name)


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
