"""Broadcast state (PyFlink's ``BroadcastStream`` / ``BroadcastConnectedStream``):
``ds.connect(rules.broadcast(descriptor)).process(fn)``.

``rules.broadcast(MapStateDescriptor, ...)`` gives a ``BroadcastStream``; connecting a stream to
it gives a ``BroadcastConnectedStream`` whose ``process`` takes a ``BroadcastProcessFunction``
(non-keyed stream) or a ``KeyedBroadcastProcessFunction`` (keyed stream). The job gets one
broadcast process operator with two inputs: the stream's elements tagged ``(0, element)``
(hash-partitioned by the stream's key when keyed) and the rules tagged ``(1, element)``, broadcast
to every subtask (``yarnflink.operators.broadcast``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yarnflink.api.connected import _tag
from yarnflink.api.transformations import Input
from yarnflink.api.typed import SideOutputsFunction
from yarnflink.common.typeinfo import check_type_info
from yarnflink.operators.broadcast import BROADCAST, ELEMENT, BroadcastProcessSpec
from yarnflink.operators.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from yarnflink.operators.keys import KeyExtractor
from yarnflink.operators.specs import KeySelectorSpec
from yarnflink.state.descriptors import MapStateDescriptor

if TYPE_CHECKING:
    from yarnflink.api.datastream import DataStream


def check_descriptors(descriptors: tuple[Any, ...]) -> list[MapStateDescriptor]:
    for d in descriptors:
        if not isinstance(d, MapStateDescriptor):
            raise TypeError(f"broadcast() takes MapStateDescriptors (the broadcast states), got {d!r}")
    names = [d.name for d in descriptors]
    if len(set(names)) != len(names):
        raise ValueError(f"broadcast(): the broadcast states need distinct names, got {names!r}")
    return list(descriptors)


class _ElementKey:
    """The key of a tagged element of the non-broadcast side: the stream's own key selector."""

    def __init__(self, spec: KeySelectorSpec):
        self.extractor = KeyExtractor(spec)

    def __call__(self, tagged: tuple[int, Any]) -> Any:
        return self.extractor.key_of(tagged[1])


class BroadcastStream:
    """A stream broadcast with broadcast states; it can only be connected to
    (``ds.connect(broadcast_stream)``)."""

    def __init__(self, input_stream: DataStream, broadcast_state_descriptors: list[MapStateDescriptor]):
        self.input_stream = input_stream
        self.broadcast_state_descriptors = broadcast_state_descriptors


class BroadcastConnectedStream:
    """``ds.connect(broadcast_stream)``: ``process(fn, output_type)``."""

    def __init__(
        self, non_broadcast_stream: DataStream, broadcast_stream: BroadcastStream, stream_classes: tuple[type, type]
    ):
        self.non_broadcast_stream = non_broadcast_stream
        self.broadcast_stream = broadcast_stream
        self.broadcast_state_descriptors = broadcast_stream.broadcast_state_descriptors
        #: DataStream and ProcessStream (their module imports this one)
        self._stream_class, self._process_stream_class = stream_classes

    def _is_keyed(self) -> bool:
        return self.non_broadcast_stream._key_selector is not None

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        keyed = self._is_keyed()
        if isinstance(func, BroadcastProcessFunction) and keyed:
            raise TypeError("BroadcastProcessFunction should be applied to non-keyed DataStream")
        if isinstance(func, KeyedBroadcastProcessFunction) and not keyed:
            raise TypeError("KeyedBroadcastProcessFunction should be applied to keyed DataStream")
        if isinstance(func, type) or not all(
            callable(getattr(func, m, None)) for m in ("process_element", "process_broadcast_element")
        ):
            raise TypeError(
                "BroadcastConnectedStream.process() needs a (Keyed)BroadcastProcessFunction object with "
                f"process_element() and process_broadcast_element(), got {func!r}"
            )
        out = check_type_info(output_type, "process()")
        fn = SideOutputsFunction(func, "process_element", out)
        first, rules = self.non_broadcast_stream, self.broadcast_stream.input_stream
        env = first._env
        # each side tagged by a map chained to its producer
        elements = (self._stream_class(env, first._t) if keyed else first).map(_tag(ELEMENT))
        broadcast = self._stream_class(env, rules._t).map(_tag(BROADCAST))
        key = first._key_selector
        inputs = [
            Input(elements._t, "hash", KeySelectorSpec(fn=_ElementKey(key))) if key is not None else elements._input(),
            Input(broadcast._t, "broadcast"),
        ]
        spec = BroadcastProcessSpec(fn, [d.name for d in self.broadcast_state_descriptors], key)
        name = "Keyed Broadcast Process" if keyed else "Broadcast Process"
        t = env._add_transformation(name, spec, "operator", inputs)
        t.output_type = out
        result: DataStream = self._process_stream_class(env, t, fn)
        return result


__all__ = ["BroadcastConnectedStream", "BroadcastStream"]
