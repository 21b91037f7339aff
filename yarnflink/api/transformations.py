"""Transformations: what the DataStream API records, and their translation into a StreamGraph
(Flink's StreamGraphGenerator).

Each DataStream method adds one ``Transformation`` to its environment. Properties set later on
the returned stream (parallelism, name, uid, ...) are stored on the transformation; defaults
(parallelism, slot sharing group, partitioning, max parallelism, runtime mode) are resolved when
the StreamGraph is generated.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from yarnflink.jobgraph.options import CoreOptions
from yarnflink.streaming.graph import (
    ChainingStrategy,
    StreamGraph,
    determine_slot_sharing_group,
)


@dataclass(eq=False)
class Input:
    transformation: Transformation
    partitioning: str | None = None  # None: forward if equal parallelism, else rebalance
    key_selector: Any = None  # KeySelectorSpec when partitioning == "hash"


@dataclass(eq=False)
class Transformation:
    id: int
    name: str  # without the "Source: " / "Sink: " prefix
    spec: Any
    role: str  # "source" | "operator" | "sink"
    inputs: list[Input] = field(default_factory=list)
    parallelism: int | None = None  # None: the job's default at generation time
    max_parallelism: int | None = None
    uid: str | None = None
    slot_sharing_group: str | None = None  # None: inherited from inputs (Flink)
    slot_sharing_group_spec: Any = None  # SlotSharingGroup object if given as one
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    #: the records' type information (``output_type=`` / ``type_info=``); None: untyped
    output_type: Any = None

    def display_name(self) -> str:
        if self.role == "source":
            return f"Source: {self.name}"
        if self.role == "sink":
            return f"Sink: {self.name}"
        return self.name


def generate_stream_graph(
    transformations: list[Transformation],
    *,
    job_name: str,
    default_parallelism: int,
    max_parallelism: int | None,
    runtime_mode: str,
    chaining_enabled: bool,
    config: dict[str, str],
) -> StreamGraph:
    graph = StreamGraph(
        job_name=job_name,
        runtime_mode=runtime_mode,
        chaining_enabled=chaining_enabled,
        max_parallelism=max_parallelism if (max_parallelism or 0) > 0 else None,
        config=dict(config),
    )
    # include inputs not in the list (a stream reused after an earlier execute(), as Flink does)
    closure: dict[int, Transformation] = {}
    stack = list(transformations)
    while stack:
        t = stack.pop()
        if t.id not in closure:
            closure[t.id] = t
            stack.extend(i.transformation for i in t.inputs)
    for t in _inputs_first(closure):
        spec = t.spec
        if (
            dataclasses.is_dataclass(spec)
            and not isinstance(spec, type)
            and any(f.name == "runtime_mode" for f in dataclasses.fields(spec))
        ):
            spec = dataclasses.replace(spec, runtime_mode=runtime_mode)
        ssg = determine_slot_sharing_group(graph, t.slot_sharing_group, [i.transformation.id for i in t.inputs])
        if t.slot_sharing_group_spec is not None:
            previous = graph.slot_sharing_groups.get(ssg)
            if previous is not None and previous != t.slot_sharing_group_spec:
                raise ValueError(
                    f"slot sharing group {ssg!r} is given with different resources on different operators "
                    f"({previous} and {t.slot_sharing_group_spec})"
                )
            graph.slot_sharing_groups[ssg] = t.slot_sharing_group_spec
        node = graph.add_node(
            t.id,
            t.display_name(),
            spec,
            t.parallelism if t.parallelism is not None else default_parallelism,
            max_parallelism=t.max_parallelism,
            uid=t.uid,
            slot_sharing_group=ssg,
            chaining_strategy=t.chaining_strategy,
        )
        # unset: neither the operator, the job (set_parallelism) nor parallelism.default (-p) says
        node.parallelism_configured = t.parallelism is not None or CoreOptions.DEFAULT_PARALLELISM.key in config
        for i in t.inputs:
            graph.add_edge(i.transformation.id, t.id, i.partitioning, i.key_selector)
    return graph


def _inputs_first(closure: dict[int, Transformation]) -> list[Transformation]:
    """The transformations in id order, each after its inputs (an input is usually created first;
    a side-output selector inserted later, ``ProcessStream``, is not)."""
    done: set[int] = set()
    order: list[Transformation] = []

    def visit(t: Transformation) -> None:
        if t.id in done:
            return
        done.add(t.id)
        for i in sorted(t.inputs, key=lambda i: i.transformation.id):
            visit(i.transformation)
        order.append(t)

    for t in sorted(closure.values(), key=lambda t: t.id):
        visit(t)
    return order
