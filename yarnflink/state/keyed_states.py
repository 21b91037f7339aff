"""The keyed state objects (PyFlink's ``ValueState``, ``ListState``, ``MapState``,
``ReducingState``, ``AggregatingState``) of both keyed state backends.

They read and write through four methods of their backend: ``_get_entry`` (the stored value or
``MISSING``), ``_put_entry``, ``_remove_entry`` and ``_owned_entry`` (the stored value, to change in
place: the heap backend copies it first if a snapshot shares it; the rocksdb backend writes it
back to the store when the current key changes).

Each object follows the backend's current key, and its own current namespace (``None`` unless a
window operator sets it). With a TTL, values are stored as ``TtlValue(value, last_access_ms)``:
per value, per list element, per map entry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from yarnflink.state.descriptors import (
    AggregatingStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateTtlConfig,
)
from yarnflink.state.snapshot_serializer import entry_key
from yarnflink.state.tables import MISSING, StateTable, TtlValue, copy_value

if TYPE_CHECKING:
    from yarnflink.state.task_state import KeyedStateBackend

_ON_READ = StateTtlConfig.UpdateType.OnReadAndWrite
_RETURN_EXPIRED = StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp


class _KeyedState:
    def __init__(self, backend: KeyedStateBackend, table: StateTable, descriptor: StateDescriptor):
        self._b = backend
        self._t = table
        self.descriptor = descriptor
        self._ns: Any = None
        ttl = descriptor.ttl_config
        self._ttl_ms = ttl.ttl_ms if ttl is not None else None
        self._touch_on_read = ttl is not None and ttl.update_type is _ON_READ
        self._return_expired = ttl is not None and ttl.state_visibility is _RETURN_EXPIRED

    # namespace (windows)
    def set_current_namespace(self, namespace: Any) -> None:
        self._ns = namespace

    def get_current_namespace(self) -> Any:
        return self._ns

    def _entry_key(self) -> Any:
        """The table's key of the current entry (``entry_key`` of the current key and namespace)."""
        return entry_key(self._b._key, self._ns)

    def _raw(self) -> Any:
        return self._b._get_entry(self._t, self._entry_key())

    def _put(self, stored: Any) -> None:
        self._b._put_entry(self._t, self._entry_key(), stored)

    def _owned(self, copier: Any = copy_value) -> Any:
        return self._b._owned_entry(self._t, self._entry_key(), copier)

    def clear(self) -> None:
        self._b._remove_entry(self._t, self._entry_key())

    # TTL helpers
    def _now(self) -> int:
        return self._b.clock()

    def _wrap(self, v: Any) -> Any:
        return TtlValue(v, self._now()) if self._ttl_ms is not None else v

    def _expired(self, tv: TtlValue) -> bool:
        return tv.ts + self._ttl_ms <= self._now()  # type: ignore[operator]


class ValueState(_KeyedState):
    def value(self) -> Any:
        v = self._raw()
        if v is MISSING:
            return None
        if self._ttl_ms is not None:
            if self._expired(v):
                self.clear()
                return v.value if self._return_expired else None
            if self._touch_on_read:
                v = TtlValue(v.value, self._now())
                self._put(v)
                return v.value
        if type(v) in (int, float, str, bytes, bool):
            return v
        v = self._owned()
        return v.value if self._ttl_ms is not None else v

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
            return
        self._put(self._wrap(value))


class _ElementsState(_KeyedState):
    """List state internals: a Python list of values (or TtlValues)."""

    def _live(self, lst: list) -> list:
        """Values of ``lst``, expired elements removed from the stored list (TTL)."""
        if self._ttl_ms is None:
            return list(lst)
        now = self._now()
        ttl = self._ttl_ms
        live = [e for e in lst if e.ts + ttl > now]
        if len(live) != len(lst):
            if live:
                self._put(live)
            else:
                self.clear()
            if self._return_expired:
                return [e.value for e in lst]
        elif live and self._touch_on_read:
            live = [TtlValue(e.value, now) for e in live]
            self._put(live)
        return [e.value for e in live]


class ListState(_ElementsState):
    def get(self) -> list:
        v = self._raw()
        if v is MISSING:
            return []
        return self._live(v)

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"list state {self.descriptor.name!r}: you cannot add None to a ListState")
        v = self._raw()
        if v is MISSING:
            self._put([self._wrap(value)])
        else:
            self._owned(list).append(self._wrap(value))

    def add_all(self, values: Iterable[Any]) -> bool:
        """Add ``values``; True if the state had no elements before."""
        values = list(values)
        if any(x is None for x in values):
            raise ValueError(f"list state {self.descriptor.name!r}: you cannot add None to a ListState")
        if not values:
            return False
        v = self._raw()
        wrapped = [self._wrap(x) for x in values]
        if v is MISSING:
            self._put(wrapped)
            return True
        self._owned(list).extend(wrapped)
        return False

    def update(self, values: Iterable[Any] | None) -> None:
        self.clear()
        if values:
            self.add_all(values)

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        saved = self._ns
        try:
            merged: list = []
            for ns in sources:
                self._ns = ns
                v = self._raw()
                if v is not MISSING:
                    merged.extend(v)
                    self.clear()
            if merged:
                self._ns = target
                v = self._raw()
                self._put((list(v) if v is not MISSING else []) + merged)
        finally:
            self._ns = saved

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class MapState(_KeyedState):
    def _entries(self) -> dict | None:
        v = self._raw()
        return None if v is MISSING else v

    def _live_value(self, d: dict, key: Any) -> Any:
        e = d.get(key, MISSING)
        if e is MISSING or self._ttl_ms is None:
            return e
        if self._expired(e):
            self._remove(key)
            return e.value if self._return_expired else MISSING
        if self._touch_on_read:
            self._owned(dict)[key] = TtlValue(e.value, self._now())
        return e.value

    def _remove(self, key: Any) -> None:
        d = self._owned(dict)
        d.pop(key, None)
        if not d:
            self.clear()

    def get(self, key: Any) -> Any:
        d = self._entries()
        if d is None:
            return None
        v = self._live_value(d, key)
        return None if v is MISSING else v

    def put(self, key: Any, value: Any) -> None:
        if self._entries() is None:
            self._put({key: self._wrap(value)})
        else:
            self._owned(dict)[key] = self._wrap(value)

    def put_all(self, mapping: dict) -> None:
        for k, v in dict(mapping).items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        d = self._entries()
        if d is not None and key in d:
            self._remove(key)

    def contains(self, key: Any) -> bool:
        d = self._entries()
        return d is not None and self._live_value(d, key) is not MISSING

    def items(self) -> list[tuple[Any, Any]]:
        d = self._entries()
        if d is None:
            return []
        out = []
        for k in list(d):
            v = self._live_value(self._entries() or {}, k)
            if v is not MISSING:
                out.append((k, v))
        return out

    def keys(self) -> list[Any]:
        return [k for k, _ in self.items()]

    def values(self) -> list[Any]:
        return [v for _, v in self.items()]

    def is_empty(self) -> bool:
        return not self.items()

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())


class _SingleValueState(_KeyedState):
    """Shared by reducing and aggregating state: one stored value (an accumulator)."""

    def _current(self) -> Any:
        v = self._raw()
        if v is MISSING:
            return MISSING
        if self._ttl_ms is not None:
            if self._expired(v):
                self.clear()
                return v.value if self._return_expired else MISSING
            if self._touch_on_read:
                self._put(TtlValue(v.value, self._now()))
            return v.value
        return v

    def _owned_current(self) -> Any:
        """The stored accumulator, copied first if a snapshot shares it (for in-place add)."""
        cur = self._current()
        if cur is MISSING:
            return MISSING
        v = self._owned()
        return v.value if self._ttl_ms is not None else v

    def get_internal(self) -> Any:
        """The stored accumulator / reduced value, None if empty (Flink's ``getInternal``)."""
        v = self._current()
        return None if v is MISSING else v

    def update_internal(self, value: Any) -> None:
        """Store ``value`` as the accumulator / reduced value (Flink's ``updateInternal``)."""
        self._put(self._wrap(value))


class ReducingState(_SingleValueState):
    def __init__(self, backend: KeyedStateBackend, table: StateTable, descriptor: ReducingStateDescriptor):
        super().__init__(backend, table, descriptor)
        self._reduce = descriptor.reduce_function

    def get(self) -> Any:
        v = self._current()
        return None if v is MISSING else v

    def add(self, value: Any) -> None:
        cur = self._owned_current()
        self._put(self._wrap(value if cur is MISSING else self._reduce(cur, value)))

    def add_all(self, values: list) -> bool:
        """``add`` of each value in order (the same result), with one read and one write.
        True if the state was empty before."""
        if not values:
            return False
        acc = self._owned_current()
        reduce = self._reduce
        it = iter(values)
        empty = acc is MISSING
        if empty:
            acc = next(it)
        for v in it:
            acc = reduce(acc, v)
        self._put(self._wrap(acc))
        return empty

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        saved = self._ns
        try:
            acc: Any = MISSING
            for ns in sources:
                self._ns = ns
                v = self._current()
                if v is not MISSING:
                    acc = v if acc is MISSING else self._reduce(acc, v)
                    self.clear()
            if acc is not MISSING:
                self._ns = target
                cur = self._current()
                self._put(self._wrap(acc if cur is MISSING else self._reduce(cur, acc)))
        finally:
            self._ns = saved


class AggregatingState(_SingleValueState):
    def __init__(self, backend: KeyedStateBackend, table: StateTable, descriptor: AggregatingStateDescriptor):
        super().__init__(backend, table, descriptor)
        self._agg = descriptor.agg_function

    def get(self) -> Any:
        acc = self._current()
        return None if acc is MISSING else self._agg.get_result(acc)

    def get_accumulator(self) -> Any:
        acc = self._current()
        return None if acc is MISSING else acc

    def add(self, value: Any) -> None:
        acc = self._owned_current()
        if acc is MISSING:
            acc = self._agg.create_accumulator()
        self._put(self._wrap(self._agg.add(value, acc)))

    def add_all(self, values: list) -> bool:
        """``add`` of each value in order (the same result), with one read and one write.
        True if the state was empty before."""
        if not values:
            return False
        acc = self._owned_current()
        empty = acc is MISSING
        if empty:
            acc = self._agg.create_accumulator()
        add = self._agg.add
        for v in values:
            acc = add(v, acc)
        self._put(self._wrap(acc))
        return empty

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        saved = self._ns
        try:
            acc: Any = MISSING
            for ns in sources:
                self._ns = ns
                v = self._current()
                if v is not MISSING:
                    acc = v if acc is MISSING else self._agg.merge(acc, v)
                    self.clear()
            if acc is not MISSING:
                self._ns = target
                cur = self._owned_current()
                self._put(self._wrap(acc if cur is MISSING else self._agg.merge(cur, acc)))
        finally:
            self._ns = saved


STATE_CLASSES: dict[str, type] = {
    "value": ValueState,
    "list": ListState,
    "map": MapState,
    "reducing": ReducingState,
    "aggregating": AggregatingState,
}
