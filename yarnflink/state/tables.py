"""The heap backend's tables (Flink's ``StateTable``): one ``StateTable`` per registered state with
one ``KeyGroupMap`` per key group, and the values kept under a TTL (``TtlValue``). The backend
(``heap``) and the state objects (``keyed_states``) both build on them.

``heap`` re-exports ``TtlValue``: snapshots pickled before it moved here name it there.
"""

from __future__ import annotations

import copy
from typing import Any

from yarnflink.state.descriptors import StateDescriptor
from yarnflink.state.handles import StateMetaInfo

MISSING: Any = object()
_IMMUTABLE = frozenset({int, float, str, bytes, bool, type(None), complex, frozenset})


def copy_value(v: Any) -> Any:
    t = type(v)
    if t in _IMMUTABLE:
        return v
    if t is tuple and all(type(x) in _IMMUTABLE for x in v):
        return v
    if t is TtlValue:
        return TtlValue(copy_value(v.value), v.ts)
    return copy.deepcopy(v)


class TtlValue:
    """A value with the processing time (ms) of its last access that counts for its TTL."""

    __slots__ = ("value", "ts")

    def __init__(self, value: Any, ts: int):
        self.value = value
        self.ts = ts

    def __reduce__(self) -> Any:
        return (TtlValue, (self.value, self.ts))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TtlValue) and other.value == self.value and other.ts == self.ts

    def __repr__(self) -> str:
        return f"TtlValue({self.value!r}, ts={self.ts})"


# ----------------------------------------------------------------------------- tables
class KeyGroupMap:
    """One state's entries in one key group. ``data``: the live entries (the task's);
    ``changes`` / ``removed``: the entries written / removed since the last synchronous point
    (``changes`` is None when no changelog is kept); ``shadow``: the snapshot side's copy, as of
    the last changelog applied (touched by the snapshot thread only)."""

    __slots__ = ("data", "changes", "removed", "shadow")

    def __init__(self, track: bool) -> None:
        self.data: dict = {}
        self.changes: dict | None = {} if track else None
        self.removed: set | None = None
        self.shadow: dict = {}


class StateTable:
    __slots__ = ("meta", "maps", "descriptor")

    def __init__(self, meta: StateMetaInfo) -> None:
        self.meta = meta
        self.maps: dict[int, KeyGroupMap] = {}
        self.descriptor: StateDescriptor | None = None
