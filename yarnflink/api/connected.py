"""``ds1.connect(ds2)``: two streams into one operator with a function per input (PyFlink's
``ConnectedStreams``), as an adapter: each side's records are tagged with their input (a chained
map), the two tagged streams are unioned, and one operator dispatches ``map1`` / ``map2``,
``flat_map1`` / ``flat_map2`` or ``process_element1`` / ``process_element2``. Keyed on both sides
(``ks1.connect(ks2)``), the union is keyed by each side's own key selector, so a
``KeyedCoProcessFunction`` has keyed state and timers shared by both inputs of a key."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from yarnflink.api.typed import typed
from yarnflink.common.typeinfo import check_type_info
from yarnflink.operators.functions import Function, KeyedProcessFunction
from yarnflink.operators.keys import KeyExtractor
from yarnflink.operators.specs import FlatMapSpec, KeySelectorSpec, MapSpec, ProcessSpec

if TYPE_CHECKING:
    from yarnflink.api.datastream import DataStream


def _tag(side: int) -> Any:
    return lambda record: (side, record)


class _TaggedKey:
    """The key of a tagged record: each side's own key selector."""

    def __init__(self, first: KeySelectorSpec, second: KeySelectorSpec):
        self.extractors = (KeyExtractor(first), KeyExtractor(second))

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        side, record = tagged
        return self.extractors[side].key_of(record)


class _CoAdapter(Function):
    """Calls the user's method of the record's side; ``open`` / ``close`` pass through."""

    def __init__(self, fn: Any, methods: tuple[str, str]):
        self.fn = fn
        self.methods = methods

    def open(self, runtime_context: Any) -> None:
        opener = getattr(self.fn, "open", None)
        if callable(opener):
            opener(runtime_context)

    def close(self) -> None:
        closer = getattr(self.fn, "close", None)
        if callable(closer):
            closer()

    def _call(self, tagged: tuple[int, Any], *args: Any) -> Any:
        side, record = tagged
        return getattr(self.fn, self.methods[side])(record, *args)


class _CoMap(_CoAdapter):
    def map(self, tagged: tuple[int, Any]) -> Any:
        return self._call(tagged)


class _CoFlatMap(_CoAdapter):
    def flat_map(self, tagged: tuple[int, Any]) -> Iterable[Any]:
        out = self._call(tagged)
        return () if out is None else out


class _CoProcess(_CoAdapter, KeyedProcessFunction):
    def process_element(self, tagged: tuple[int, Any], ctx: Any) -> Iterable[Any]:
        out = self._call(tagged, ctx)
        return () if out is None else out

    def on_timer(self, timestamp: int, ctx: Any) -> Iterable[Any]:
        on_timer = getattr(self.fn, "on_timer", None)
        out = on_timer(timestamp, ctx) if callable(on_timer) else None
        return () if out is None else out


def _check(fn: Any, methods: tuple[str, str], call: str) -> None:
    if isinstance(fn, type) or not all(callable(getattr(fn, m, None)) for m in methods):
        raise TypeError(f"{call} needs a function object with {methods[0]}() and {methods[1]}(), got {fn!r}")


class ConnectedStreams:
    """Two streams connected: ``map``, ``flat_map``, ``process`` (and ``key_by`` of both sides)."""

    def __init__(self, first: DataStream, second: DataStream, stream_class: type[DataStream]):
        self.first = first
        self.second = second
        self._stream_class = stream_class  # DataStream (its module imports this one)

    def _keys(self) -> tuple[KeySelectorSpec, KeySelectorSpec] | None:
        k1, k2 = self.first._key_selector, self.second._key_selector
        if (k1 is None) != (k2 is None):
            raise ValueError("connect(): key both streams (key_by on each) or neither")
        return (k1, k2) if k1 is not None and k2 is not None else None

    def key_by(self, key_selector1: Any, key_selector2: Any, key_type: Any = None) -> ConnectedStreams:
        return ConnectedStreams(self.first.key_by(key_selector1), self.second.key_by(key_selector2), self._stream_class)

    def _union(self) -> DataStream:
        # a keyed side is tagged after its producer; the connected operator's key_by repartitions the union
        tagged = [self._stream_class(s._env, s._t).map(_tag(i)) for i, s in enumerate((self.first, self.second))]
        return tagged[0].union(tagged[1])

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        _check(func, ("map1", "map2"), "ConnectedStreams.map()")
        out = check_type_info(output_type, "map()")
        return self._apply("Co-Map", MapSpec(fn=typed(_CoMap(func, ("map1", "map2")), "map", out, single=True)), out)

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        _check(func, ("flat_map1", "flat_map2"), "ConnectedStreams.flat_map()")
        out = check_type_info(output_type, "flat_map()")
        fn = typed(_CoFlatMap(func, ("flat_map1", "flat_map2")), "flat_map", out, single=False)
        return self._apply("Co-Flat Map", FlatMapSpec(fn=fn), out)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        if callable(getattr(func, "process_broadcast_element", None)):
            raise TypeError(
                "a (Keyed)BroadcastProcessFunction needs a BroadcastStream: connect(ds.broadcast(map_state_descriptor))"
            )
        _check(func, ("process_element1", "process_element2"), "ConnectedStreams.process()")
        out = check_type_info(output_type, "process()")
        fn = typed(_CoProcess(func, ("process_element1", "process_element2")), "process_element", out, single=False)
        keys = self._keys()
        union = self._union()
        if keys is None:
            return union._then("Co-Process", ProcessSpec(fn=fn), out)
        keyed = union.key_by(_TaggedKey(*keys))
        return keyed._then("Keyed Co-Process", ProcessSpec(fn=fn, key_selector=keyed.get_key_selector()), out)

    def _apply(self, name: str, spec: Any, out: Any) -> DataStream:
        keys = self._keys()
        union = self._union()
        if keys is not None:
            union = union.key_by(_TaggedKey(*keys))
        return union._then(name, spec, out)


__all__ = ["ConnectedStreams"]
