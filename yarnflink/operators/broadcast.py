"""The broadcast process operator (Flink's ``CoBroadcastWithKeyedOperator`` /
``CoBroadcastWithNonKeyedOperator``): ``ds.connect(rules.broadcast(descriptor)).process(fn)``.

Its two inputs arrive tagged, ``(0, element)`` from the non-broadcast stream (hash-partitioned by
its key when keyed) and ``(1, element)`` from the broadcast stream (every element to every
subtask). ``fn.process_broadcast_element(element, ctx)`` gets the writable ``BroadcastState`` of
each descriptor (``ctx.get_broadcast_state(descriptor)``); ``fn.process_element(element, ctx)``
and ``fn.on_timer(timestamp, ctx)`` a read-only view, and, keyed, keyed state and timers as in a
``KeyedProcessFunction``. Flink does not order the two inputs: an element may arrive before the
broadcast elements it needs (buffer it in keyed state, or wait for a timer).

Checkpoints: keyed state and timers as ``KeyedProcessOperator``; the broadcast states (one dict
per descriptor) as union operator state ``broadcast-states``, one copy per subtask. On restore,
at any parallelism, subtask ``i`` takes the copy of old subtask ``i % old parallelism``, as
Flink's broadcast state does (every copy is the same when the user updates the state from the
broadcast elements only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yarnflink.common.keygroups import key_group_of
from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.checkpointed import CheckpointedValue
from yarnflink.operators.functions import RuntimeContext
from yarnflink.operators.specs import KeySelectorSpec, ProcessSpec
from yarnflink.operators.timers import KeyedProcessOperator, _Context, _extend, _NoTimers, _UserTimerService
from yarnflink.state.broadcast import BroadcastState, ReadOnlyBroadcastState

#: the input tags of the two sides
ELEMENT, BROADCAST = 0, 1


@dataclass
class BroadcastProcessSpec:
    """``connect(broadcast_stream).process(fn)``; ``key_selector``: the non-broadcast side's key
    (a ``KeyedBroadcastProcessFunction``), None for a ``BroadcastProcessFunction``."""

    fn: Any
    state_names: list[str] = field(default_factory=list)
    key_selector: KeySelectorSpec | None = None
    kind: str = "broadcast_process"


def _state_name(descriptor: Any) -> str:
    name = getattr(descriptor, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"get_broadcast_state() needs the MapStateDescriptor given to broadcast(), got {descriptor!r}")
    return name


class _States:
    """The broadcast states of one subtask, by descriptor name."""

    def __init__(self, names: list[str]) -> None:
        self.names = list(names)
        self.entries: dict[str, dict] = {n: {} for n in names}

    def get(self, descriptor: Any, writable: bool) -> ReadOnlyBroadcastState:
        name = _state_name(descriptor)
        entries = self.entries.get(name)
        if entries is None:
            raise ValueError(
                f"get_broadcast_state(): {name!r} is not a broadcast state of this stream; "
                f"broadcast(...) declared {self.names!r}"
            )
        return (BroadcastState if writable else ReadOnlyBroadcastState)(name, entries)


class _ReadOnlyContext(_Context):
    """``ctx`` of ``process_element`` and ``on_timer``: the element's timestamp, the key and
    timers (keyed), time queries, read-only broadcast state."""

    def __init__(self, timer_service: Any, op: BroadcastProcessOperator) -> None:
        super().__init__(timer_service)
        self._op = op

    def get_broadcast_state(self, state_descriptor: Any) -> ReadOnlyBroadcastState:
        return self._op.states.get(state_descriptor, writable=False)

    def current_processing_time(self) -> int:
        return self._op.clock()

    def current_watermark(self) -> int:
        return self._op.current_watermark()


class _BroadcastContext:
    """``ctx`` of ``process_broadcast_element``: the element's timestamp, time queries and the
    writable broadcast state."""

    def __init__(self, op: BroadcastProcessOperator) -> None:
        self._op = op
        self._ts: int | None = None

    def timestamp(self) -> int | None:
        return self._ts

    def current_processing_time(self) -> int:
        return self._op.clock()

    def current_watermark(self) -> int:
        return self._op.current_watermark()

    def get_broadcast_state(self, state_descriptor: Any) -> BroadcastState:
        state = self._op.states.get(state_descriptor, writable=True)
        assert isinstance(state, BroadcastState)
        return state


class BroadcastProcessOperator(KeyedProcessOperator):
    def __init__(self, spec: BroadcastProcessSpec):
        if not callable(getattr(spec.fn, "process_broadcast_element", None)):
            raise TypeError(f"a broadcast process function needs process_broadcast_element(), got {spec.fn!r}")
        super().__init__(ProcessSpec(fn=spec.fn, key_selector=spec.key_selector))
        self._process_broadcast = spec.fn.process_broadcast_element
        self.states = _States(spec.state_names)
        self._checkpointed: CheckpointedValue | None = None
        self._bctx = _BroadcastContext(self)

    def current_watermark(self) -> int:
        assert self.timers is not None
        return self.timers.current_watermark

    def open(self, ctx: OperatorContext) -> None:
        rich = self.rich
        if self.keys is None:
            self.rich = None  # a BroadcastProcessFunction gets no keyed state: opened below
        try:
            super().open(ctx)
        finally:
            self.rich = rich
        if self.keys is None and rich is not None:
            rich.open(RuntimeContext(ctx))
            self._opened = True
        self._checkpointed = CheckpointedValue(ctx, "broadcast-states", union=True)
        copies = self._checkpointed.restored
        if copies:
            # every old subtask's copy is here (union state); take one, as Flink does
            for name, entries in copies[ctx.subtask_index % len(copies)].items():
                self.states.entries[name] = dict(entries)
        assert self.timers is not None
        timers: Any = _UserTimerService(self.timers) if self.keys is not None else _NoTimers(self.current_watermark)
        self.pctx = _ReadOnlyContext(timers, self)

    def process_batch(self, batch: Batch) -> None:
        self._fire_processing_timers()
        rows = batch.rows()
        if not rows:
            return
        ts_list = batch.timestamps.tolist() if batch.timestamps is not None else None
        fn, broadcast_fn = self.fn, self._process_broadcast
        pctx, bctx, backend, keys = self.pctx, self._bctx, self.backend, self.keys
        assert backend is not None
        max_parallelism = self.ctx.max_parallelism
        out: list = []
        out_ts: list = []
        c = self.cancellation
        for i, (side, element) in enumerate(rows):
            if c.cancelled:
                c.check()
            ts = ts_list[i] if ts_list is not None else None
            n = len(out)
            if side == BROADCAST:
                bctx._ts = ts
                _extend(out, broadcast_fn(element, bctx), self._bad_result)
            else:
                if keys is not None:
                    k = keys.key_of(element)
                    backend.set_current_key(k, key_group_of(k, max_parallelism))
                    pctx._current_key = k
                pctx._ts = ts
                _extend(out, fn(element, pctx), self._bad_result)
            if ts_list is not None:
                out_ts.extend([ts] * (len(out) - n))
        pctx._ts = bctx._ts = None
        if out:
            self.output.emit(Batch(out, None, np.array(out_ts, dtype=np.int64) if ts_list is not None else None))

    def snapshot_state(self, checkpoint_id: int, timestamp: int, stream_factory: Any = None) -> list:
        futures = super().snapshot_state(checkpoint_id, timestamp, stream_factory)
        if self._checkpointed is not None:
            copy = {name: dict(entries) for name, entries in self.states.entries.items()}
            futures += self._checkpointed.snapshot(copy, checkpoint_id, timestamp, stream_factory)
        return futures


__all__ = ["BROADCAST", "ELEMENT", "BroadcastProcessOperator", "BroadcastProcessSpec"]
