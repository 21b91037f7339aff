"""Helpers for event-time operator tests: an output that records batches (with timestamps) and
watermarks, a settable clock, and an operator harness."""

from __future__ import annotations

from typing import Any

import numpy as np

from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.factory import create_operator
from yarnflink.operators.watermarks import Watermark


class Clock:
    def __init__(self, t: int = 0) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


class Recorder:
    """Output: every element in order: ("rows", rows, timestamps | None) or ("wm", element)."""

    def __init__(self) -> None:
        self.log: list = []
        self.ended = 0

    def emit(self, batch: Batch) -> None:
        ts = batch.timestamps
        self.log.append(("rows", batch.rows(), None if ts is None else [int(t) for t in ts]))

    def emit_watermark(self, element: Any) -> None:
        self.log.append(("wm", element))

    def end_input(self) -> None:
        self.ended += 1

    @property
    def rows(self) -> list:
        return [r for e in self.log if e[0] == "rows" for r in e[1]]

    @property
    def timestamped(self) -> list:
        return [(r, t) for e in self.log if e[0] == "rows" for r, t in zip(e[1], e[2] or [None] * len(e[1]))]

    @property
    def watermarks(self) -> list:
        return [e[1] for e in self.log if e[0] == "wm"]

    def clear(self) -> None:
        self.log = []


def ctx(
    name: str = "op",
    subtask: int = 0,
    parallelism: int = 1,
    max_parallelism: int = 128,
    state: Any | None = None,
    **config: str,
) -> OperatorContext:
    return OperatorContext(
        task_name="task",
        operator_name=name,
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        config=dict(config),
        state=state,
        operator_id=name,
    )


def open_operator(spec: Any, clock: Clock | None = None, **kw: Any) -> tuple[Any, Recorder]:
    op = create_operator(spec)
    if clock is not None:
        op.clock = clock
    out = Recorder()
    op.output = out
    op.open(ctx(**kw))
    return op, out


def batch(rows: list, timestamps: list | None = None) -> Batch:
    return Batch(list(rows), None, None if timestamps is None else np.array(timestamps, dtype=np.int64))


def events(*items: tuple) -> Batch:
    """Records ``(key, value, timestamp)`` with the timestamp attached."""
    return batch(list(items), [t for _, _, t in items])


def wm(t: int) -> Watermark:
    return Watermark(t)
