"""Broadcast state (Flink's ``BroadcastState``): a map per ``MapStateDescriptor`` that every
subtask of a broadcast-connected operator holds in full, written by the broadcast side only.

``BroadcastState`` is what ``process_broadcast_element`` gets from ``ctx.get_broadcast_state``;
``ReadOnlyBroadcastState`` is the view the other side (``process_element``, ``on_timer``) gets.
Both wrap the same dict, so what the broadcast side put is seen at once. The user must keep every
subtask's copy the same (update it from the broadcast elements alone), as in Flink: on restore
each subtask takes one subtask's copy (``yarnflink.operators.broadcast``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any


class ReadOnlyBroadcastState:
    """``get``, ``contains``, ``items``, ``keys``, ``values``, ``is_empty``, ``state[key]``,
    ``key in state``, ``iter(state)``."""

    def __init__(self, name: str, entries: dict) -> None:
        self.name = name
        self._entries = entries

    def get(self, key: Any) -> Any:
        """The value of ``key`` (None if absent, as Java's null)."""
        return self._entries.get(key)

    def contains(self, key: Any) -> bool:
        return key in self._entries

    def items(self) -> Iterable[tuple[Any, Any]]:
        return list(self._entries.items())

    def keys(self) -> Iterable[Any]:
        return list(self._entries)

    def values(self) -> Iterable[Any]:
        return list(self._entries.values())

    def is_empty(self) -> bool:
        return not self._entries

    def __getitem__(self, key: Any) -> Any:
        return self.get(key)

    def __contains__(self, key: Any) -> bool:
        return self.contains(key)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def _read_only(self, call: str) -> TypeError:
        return TypeError(
            f"broadcast state {self.name!r}: {call} is not allowed here; the state is read-only in "
            "process_element() and on_timer() (update it in process_broadcast_element())"
        )

    def put(self, key: Any, value: Any) -> None:
        raise self._read_only("put()")

    def put_all(self, dict_value: dict) -> None:
        raise self._read_only("put_all()")

    def remove(self, key: Any) -> None:
        raise self._read_only("remove()")

    def clear(self) -> None:
        raise self._read_only("clear()")

    def __setitem__(self, key: Any, value: Any) -> None:
        self.put(key, value)

    def __delitem__(self, key: Any) -> None:
        self.remove(key)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, {len(self._entries)} entries)"


class BroadcastState(ReadOnlyBroadcastState):
    """The writable broadcast state of ``process_broadcast_element``: also ``put``, ``put_all``,
    ``remove``, ``clear``, ``state[key] = value``, ``del state[key]``."""

    def put(self, key: Any, value: Any) -> None:
        self._entries[key] = value

    def put_all(self, dict_value: dict) -> None:
        self._entries.update(dict_value)

    def remove(self, key: Any) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()


__all__ = ["BroadcastState", "ReadOnlyBroadcastState"]
