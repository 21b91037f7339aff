"""The per-record path of tumbling and sliding event-time windows: contents in plain dicts.

``WindowBuffers`` keeps, per window start, a dict key -> contents (the reduced value, the
aggregate's accumulator, or the list of elements for process / apply), in the order each
(key, window) got its first element. A record costs two dict operations and the user's function;
no window object, state access or timer per record. A watermark fires every window it closes in
that order, which is the per-record path's timer order (window end, then registration order).

As the columnar path (``window_columns``), it is kept outside the keyed backend between
checkpoints: at a snapshot the ``WindowOperator`` writes the contents into the backend in the
backend form (``window-contents`` per (key, window) and the window's timers), snapshots and removes
them again; restored entries move into the dicts when the buffers are created (``adopt``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

MISSING: Any = object()


class WindowBuffers:
    def __init__(self, kind: str, function: Any, size: int, slide: int, offset: int, allowed_lateness: int) -> None:
        if kind not in ("reduce", "aggregate", "process", "apply"):
            raise ValueError(f"unknown window function kind {kind!r}")
        self.kind = kind
        self.function = function
        self.size, self.slide, self.offset = size, slide, offset
        self.allowed_lateness = allowed_lateness
        self.buckets: dict[int, dict[Any, Any]] = {}  # window start -> {key: contents}
        self.fired: set[int] = set()  # starts of windows that fired and wait for their cleanup

    def cleanup_time(self, start: int) -> int:
        return start + self.size - 1 + self.allowed_lateness

    def _starts(self, t: int) -> range:
        last = t - (t - self.offset) % self.slide
        return range(last, t - self.size, -self.slide)

    def _fold(self, bucket: dict, key: Any, value: Any) -> None:
        kind = self.kind
        if kind == "reduce":
            cur = bucket.get(key, MISSING)
            bucket[key] = value if cur is MISSING else self.function(cur, value)
        elif kind == "aggregate":
            cur = bucket.get(key, MISSING)
            if cur is MISSING:
                cur = self.function.create_accumulator()
            bucket[key] = self.function.add(value, cur)
        else:
            lst = bucket.get(key)
            if lst is None:
                bucket[key] = [value]
            else:
                lst.append(value)

    def add_batch(
        self,
        keys: list,
        rows: list,
        ts_list: list,
        watermark: int,
        refire: Callable[[Any, int, Any], None],
    ) -> list[int]:
        """Add the records; ``refire(key, start, contents)`` right after an element lands in a
        window that fired and is within the allowed lateness (it fires again, per element).
        Returns the indexes of late elements (no window took them, and they are late)."""
        if not rows:
            return []
        buckets = self.buckets
        if self.slide == self.size and min(ts_list) > watermark:  # one window each, none fired
            size, offset, kind = self.size, self.offset, self.kind
            bucket: dict | None = None
            current = None
            if kind == "reduce":
                fn = self.function
                for key, value, t in zip(keys, rows, ts_list):
                    start = t - (t - offset) % size
                    if start != current:
                        current = start
                        bucket = buckets.get(start)
                        if bucket is None:
                            bucket = buckets[start] = {}
                    cur = bucket.get(key, MISSING)  # type: ignore[union-attr]
                    bucket[key] = value if cur is MISSING else fn(cur, value)  # type: ignore[index]
            else:
                for key, value, t in zip(keys, rows, ts_list):
                    start = t - (t - offset) % size
                    if start != current:
                        current = start
                        bucket = buckets.get(start)
                        if bucket is None:
                            bucket = buckets[start] = {}
                    self._fold(bucket, key, value)  # type: ignore[arg-type]
            return []
        late: list[int] = []
        lateness = self.allowed_lateness
        for i, (key, value, t) in enumerate(zip(keys, rows, ts_list)):
            taken = False
            for start in self._starts(t):
                if self.cleanup_time(start) <= watermark:
                    continue  # past its cleanup time
                taken = True
                bucket = buckets.get(start)
                if bucket is None:
                    bucket = buckets[start] = {}
                self._fold(bucket, key, value)
                if start + self.size - 1 <= watermark:  # fired already: fires again
                    self.fired.add(start)
                    refire(key, start, bucket[key])
            if not taken and t + lateness <= watermark:
                late.append(i)
        return late

    def fire(
        self,
        watermark: int,
        emit: Callable[[Any, int, Any], None],
        cleared: Callable[[Any, int], None] | None = None,
    ) -> None:
        """Fire the windows the watermark closes (``emit(key, start, contents)`` per key, in
        order) and drop those past their cleanup time (``cleared(key, start)`` per key)."""
        for start in sorted(self.buckets):
            if start + self.size - 1 > watermark:
                break
            bucket = self.buckets[start]
            if start not in self.fired:
                for key, contents in bucket.items():
                    emit(key, start, contents)
                self.fired.add(start)
            if self.cleanup_time(start) <= watermark:
                if cleared is not None:
                    for key in bucket:
                        cleared(key, start)
                del self.buckets[start]
                self.fired.discard(start)

    def entries(self) -> Iterator[tuple[Any, int, Any, bool]]:
        """``(key, start, contents, fired)`` of every (key, window)."""
        for start in sorted(self.buckets):
            fired = start in self.fired
            for key, contents in self.buckets[start].items():
                yield key, start, contents, fired

    def adopt(self, key: Any, start: int, contents: Any, fired: bool) -> None:
        self.buckets.setdefault(start, {})[key] = contents
        if fired:
            self.fired.add(start)
