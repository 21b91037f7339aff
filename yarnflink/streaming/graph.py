"""StreamGraph: the operator-level dataflow, before chaining (Flink's StreamGraph).

One ``StreamNode`` per operator (source, transformation, sink) with its resolved parallelism,
max parallelism, uid, slot sharing group and chaining strategy; one ``StreamEdge`` per connection
with its partitioning (plus the key selector for ``hash``). ``yarnflink.api`` builds it from the
user's program; ``jobgraph_generator.create_job_graph`` chains it into a JobGraph.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, field
from typing import Any

from yarnflink.jobgraph.jobgraph import MAX_PARALLELISM_LIMIT, PARTITIONINGS

DEFAULT_SLOT_SHARING_GROUP = "default"


class StreamGraphError(ValueError):
    """The program describes an invalid dataflow; the message names the operators involved."""


class ChainingStrategy(str, enum.Enum):
    """Flink's ChainingStrategy: ALWAYS chains with predecessor and successors; HEAD
    (``start_new_chain``) never chains with its predecessor; NEVER (``disable_chaining``) chains
    with nothing."""

    ALWAYS = "ALWAYS"
    HEAD = "HEAD"
    NEVER = "NEVER"


@dataclass
class StreamNode:
    id: int
    name: str
    spec: Any  # a yarnflink.operators.specs.*Spec
    parallelism: int
    max_parallelism: int | None = None  # explicitly set (operator), else None
    uid: str | None = None
    slot_sharing_group: str = DEFAULT_SLOT_SHARING_GROUP
    chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS
    #: False: neither the operator nor the job set the parallelism (the AdaptiveBatch scheduler may)
    parallelism_configured: bool = True
    in_edges: list[StreamEdge] = field(default_factory=list)
    out_edges: list[StreamEdge] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return getattr(self.spec, "kind", "operator")

    @property
    def is_source(self) -> bool:
        return not self.in_edges

    def __repr__(self) -> str:
        return f"StreamNode({self.id}, {self.name!r}, p={self.parallelism})"

    def label(self) -> str:
        return f"'{self.name}' (node {self.id})"


@dataclass
class StreamEdge:
    source_id: int
    target_id: int
    partitioning: str
    key_selector: Any = None  # KeySelectorSpec for hash

    def __repr__(self) -> str:
        return f"StreamEdge({self.source_id} -{self.partitioning}-> {self.target_id})"


@dataclass
class StreamGraph:
    job_name: str = "yarnflink Streaming Job"
    runtime_mode: str = "STREAMING"
    chaining_enabled: bool = True
    #: env-level default max parallelism (``pipeline.max-parallelism`` / ``set_max_parallelism``)
    max_parallelism: int | None = None
    config: dict[str, str] = field(default_factory=dict)
    nodes: dict[int, StreamNode] = field(default_factory=dict)
    edges: list[StreamEdge] = field(default_factory=list)
    #: slot sharing group name -> SlotSharingGroup (resources), when given as an object
    slot_sharing_groups: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ building
    def add_node(
        self,
        node_id: int,
        name: str,
        spec: Any,
        parallelism: int,
        *,
        max_parallelism: int | None = None,
        uid: str | None = None,
        slot_sharing_group: str = DEFAULT_SLOT_SHARING_GROUP,
        chaining_strategy: ChainingStrategy = ChainingStrategy.ALWAYS,
    ) -> StreamNode:
        if node_id in self.nodes:
            raise StreamGraphError(f"duplicate stream node id {node_id}")
        if not isinstance(parallelism, int) or parallelism < 1:
            raise StreamGraphError(f"operator '{name}' (node {node_id}): parallelism must be >= 1, got {parallelism!r}")
        if max_parallelism is not None:
            if not 1 <= max_parallelism <= MAX_PARALLELISM_LIMIT:
                raise StreamGraphError(
                    f"operator '{name}' (node {node_id}): max parallelism must be between 1 and "
                    f"{MAX_PARALLELISM_LIMIT}, got {max_parallelism}"
                )
            if parallelism > max_parallelism:
                raise StreamGraphError(
                    f"operator '{name}' (node {node_id}): parallelism {parallelism} is larger than "
                    f"its max parallelism {max_parallelism}"
                )
        if uid is not None:
            for other in self.nodes.values():
                if other.uid == uid:
                    raise StreamGraphError(
                        f"uid {uid!r} is used by both {other.label()} and '{name}' (node {node_id}); "
                        "uids must be unique within a job"
                    )
        node = StreamNode(
            id=node_id,
            name=name,
            spec=spec,
            parallelism=parallelism,
            max_parallelism=max_parallelism,
            uid=uid,
            slot_sharing_group=slot_sharing_group,
            chaining_strategy=ChainingStrategy(chaining_strategy),
        )
        self.nodes[node_id] = node
        return node

    def add_edge(
        self,
        source_id: int,
        target_id: int,
        partitioning: str | None = None,
        key_selector: Any = None,
    ) -> StreamEdge:
        """Connect two nodes. ``partitioning=None`` picks Flink's default: forward if the
        parallelisms are equal, else rebalance. An explicit forward between different
        parallelisms is an error naming both operators."""
        src, tgt = self.node(source_id), self.node(target_id)
        if partitioning is None:
            partitioning = "forward" if src.parallelism == tgt.parallelism else "rebalance"
        if partitioning not in PARTITIONINGS:
            raise StreamGraphError(f"unknown partitioning {partitioning!r} (known: {', '.join(PARTITIONINGS)})")
        if partitioning == "forward" and src.parallelism != tgt.parallelism:
            raise StreamGraphError(
                f"forward partitioning does not allow a change of parallelism: upstream operator "
                f"{src.label()} has parallelism {src.parallelism}, downstream operator {tgt.label()} "
                f"has parallelism {tgt.parallelism}; use another partitioning (rebalance, rescale, "
                "shuffle, broadcast) or give both the same parallelism"
            )
        if partitioning == "hash" and key_selector is None:
            raise StreamGraphError(f"hash edge {src.label()} -> {tgt.label()} needs a key selector")
        edge = StreamEdge(source_id, target_id, partitioning, key_selector if partitioning == "hash" else None)
        self.edges.append(edge)
        src.out_edges.append(edge)
        tgt.in_edges.append(edge)
        return edge

    # ------------------------------------------------------------------ navigation
    def node(self, node_id: int) -> StreamNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise StreamGraphError(f"unknown stream node {node_id}") from None

    def sources(self) -> list[StreamNode]:
        return [n for n in sorted(self.nodes.values(), key=lambda n: n.id) if not n.in_edges]

    def sinks(self) -> list[StreamNode]:
        return [n for n in sorted(self.nodes.values(), key=lambda n: n.id) if not n.out_edges]

    def topological_order(self) -> list[StreamNode]:
        """Nodes with every input before its consumers; ties broken by node id."""
        indeg = {nid: len(n.in_edges) for nid, n in self.nodes.items()}
        ready = [nid for nid, d in indeg.items() if d == 0]
        heapq.heapify(ready)
        order: list[StreamNode] = []
        while ready:
            nid = heapq.heappop(ready)
            order.append(self.nodes[nid])
            for e in self.nodes[nid].out_edges:
                indeg[e.target_id] -= 1
                if indeg[e.target_id] == 0:
                    heapq.heappush(ready, e.target_id)
        if len(order) != len(self.nodes):
            raise StreamGraphError("the stream graph has a cycle")
        return order

    def is_chainable(self, edge: StreamEdge) -> bool:
        """Flink's chaining rule for one edge: forward, equal parallelism, single-input
        downstream, same slot sharing group, strategies allow it, chaining enabled."""
        up, down = self.nodes[edge.source_id], self.nodes[edge.target_id]
        return (
            self.chaining_enabled
            and edge.partitioning == "forward"
            and up.parallelism == down.parallelism
            and len(down.in_edges) == 1
            and up.slot_sharing_group == down.slot_sharing_group
            and up.chaining_strategy != ChainingStrategy.NEVER
            and down.chaining_strategy == ChainingStrategy.ALWAYS
        )


def determine_slot_sharing_group(graph: StreamGraph, specified: str | None, input_ids: list[int]) -> str:
    """Flink's StreamGraphGenerator.determineSlotSharingGroup: the specified group, else the
    group shared by all inputs, else ``"default"`` (sources, or inputs in different groups)."""
    if specified is not None:
        return specified
    groups = {graph.node(i).slot_sharing_group for i in input_ids}
    if len(groups) == 1:
        return groups.pop()
    return DEFAULT_SLOT_SHARING_GROUP
