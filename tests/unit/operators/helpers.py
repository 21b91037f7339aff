"""Shared test helpers for yarnflink.operators tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.factory import create_operator


class ListOutput:
    """An Output that records every batch and the end_input calls."""

    def __init__(self, log: list | None = None, name: str = "out"):
        self.batches: list[Batch] = []
        self.ended = 0
        self.log = log
        self.name = name

    def emit(self, batch: Batch) -> None:
        self.batches.append(batch)
        if self.log is not None:
            self.log.append(("emit", self.name, len(batch)))

    def end_input(self) -> None:
        self.ended += 1
        if self.log is not None:
            self.log.append(("end", self.name))

    @property
    def rows(self) -> list:
        return [r for b in self.batches for r in b.rows()]


def make_ctx(name: str = "op", subtask: int = 0, parallelism: int = 1, **kw: Any) -> OperatorContext:
    return OperatorContext(
        task_name="task",
        operator_name=name,
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=kw.pop("max_parallelism", 128),
        **kw,
    )


def run_operator(spec, batches: list, subtask: int = 0, parallelism: int = 1, **ctx_kw):
    """Open an operator for ``spec``, push ``batches`` (Batch or list of rows), end and close it;
    returns (operator, ListOutput)."""
    op = create_operator(spec)
    out = ListOutput()
    op.output = out
    op.open(make_ctx(subtask=subtask, parallelism=parallelism, **ctx_kw))
    for b in batches:
        op.process_batch(b if isinstance(b, Batch) else Batch.from_rows(b))
    op.end_input()
    op.close()
    return op, out


def source_rows(spec, subtask: int = 0, parallelism: int = 1) -> list:
    op = create_operator(spec)
    op.output = ListOutput()
    op.open(make_ctx(subtask=subtask, parallelism=parallelism))
    rows = [r for b in op.batches() for r in b.rows()]
    op.close()
    return rows


@dataclass
class Desc:
    node_id: int
    name: str
    kind: str
    spec: bytes
    chained_outputs: list = field(default_factory=list)
    output_datasets: list = field(default_factory=list)


def desc(node_id: int, spec, chained=(), datasets=(), name: str | None = None) -> Desc:
    return Desc(
        node_id,
        name or f"{type(spec).__name__}-{node_id}",
        spec.kind,
        cloudpickle.dumps(spec),
        list(chained),
        list(datasets),
    )


class RecordingWriter:
    """A ChannelWriter that records what it gets."""

    def __init__(self):
        self.emitted: list[tuple[int, Any]] = []
        self.broadcasts: list = []
        self.finished = 0

    def emit(self, channel, rb):
        self.emitted.append((channel, rb))

    def broadcast(self, rb):
        self.broadcasts.append(rb)

    def finish(self):
        self.finished += 1

    def rows_by_channel(self) -> dict[int, list]:
        from yarnflink.common.records import arrow_to_records

        out: dict[int, list] = {}
        for ch, rb in self.emitted:
            out.setdefault(ch, []).extend(arrow_to_records(rb))
        return out
