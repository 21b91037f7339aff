"""StreamGraph -> JobGraph (Flink's StreamingJobGraphGenerator).

* Chaining: an edge is chained iff ``StreamGraph.is_chainable`` (forward, equal parallelism,
  single-input downstream, same slot sharing group, chaining strategies allow it, and
  ``pipeline.operator-chaining.enabled``). One JobVertex per chain; its operators are listed head
  first, then in depth-first order of the chained outputs.
* Names as Flink: ``"Source: Sequence -> Map -> Filter"``, a branch within a chain as
  ``"A -> (B, C)"``.
* Ids: each StreamNode gets a 16-byte hash like Flink's StreamGraphHasherV2: from its uid if set,
  else from its position in a breadth-first traversal from the sources, the number of its
  chainable outputs, and its inputs' hashes. So the same program gives the same ids, and a uid
  pins an id across program changes. A JobVertex takes its head's hash; an IntermediateDataSet's
  id is derived from the hashes of both ends of its edge.
* One IntermediateDataSet per non-chained edge: PIPELINED_BOUNDED, or BLOCKING in BATCH mode
  (``execution.batch-shuffle-mode: ALL_EXCHANGES_BLOCKING``, Flink's default), which makes every
  exchange a pipelined-region boundary: regions run one after another and failover restarts them
  alone.
* Max parallelism: the head operator's (else another chained operator's), else the graph's
  (``pipeline.max-parallelism`` / env), else Flink's default derived from the parallelism.
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any

import cloudpickle

from yarnflink.jobgraph.jobgraph import (
    MAX_PARALLELISM_LIMIT,
    IntermediateDataSet,
    JobEdge,
    JobGraph,
    JobVertex,
    OperatorDescriptor,
    new_id,
)
from yarnflink.jobgraph.options import ExecutionOptions
from yarnflink.streaming.graph import StreamEdge, StreamGraph, StreamGraphError, StreamNode

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 128  # 1 << 7
UPPER_BOUND_MAX_PARALLELISM = MAX_PARALLELISM_LIMIT  # 1 << 15


def round_up_to_power_of_two(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def compute_default_max_parallelism(parallelism: int) -> int:
    """Flink's KeyGroupRangeAssignment.computeDefaultMaxParallelism."""
    return min(
        max(round_up_to_power_of_two(parallelism + parallelism // 2), DEFAULT_LOWER_BOUND_MAX_PARALLELISM),
        UPPER_BOUND_MAX_PARALLELISM,
    )


# ----------------------------------------------------------------------------- hashing
def _hash(*parts: Any) -> bytes:
    h = hashlib.blake2b(digest_size=16, person=b"yarnflink-node")
    for p in parts:
        h.update(repr(p).encode("utf-8"))
        h.update(b"\x00")
    return h.digest()


def compute_node_hashes(graph: StreamGraph) -> dict[int, bytes]:
    """16-byte hash per StreamNode (Flink's StreamGraphHasherV2 scheme; see module doc)."""
    hashes: dict[int, bytes] = {}
    used_by: dict[bytes, StreamNode] = {}
    remaining: deque[StreamNode] = deque(graph.sources())
    visited = {n.id for n in remaining}
    while remaining:
        node = remaining.popleft()
        if node.uid is not None:
            h = _hash("uid", node.uid)
        else:
            if any(e.source_id not in hashes for e in node.in_edges):
                visited.discard(node.id)  # revisited once its other inputs are hashed
                continue
            position = len(hashes)
            chainable = sum(1 for e in node.out_edges if graph.is_chainable(e))
            local = bytearray(_hash("node", position, *([position] * chainable)))
            for e in node.in_edges:
                other = hashes[e.source_id]
                for j in range(len(local)):
                    local[j] = ((local[j] * 37) ^ other[j]) & 0xFF
            h = bytes(local)
        if h in used_by:
            clash = used_by[h]
            if node.uid is not None:
                raise StreamGraphError(
                    f"uid {node.uid!r} of {node.label()} collides with {clash.label()}; uids must be unique"
                )
            raise StreamGraphError(f"hash collision between {node.label()} and {clash.label()}")
        used_by[h] = node
        hashes[node.id] = h
        for e in node.out_edges:
            if e.target_id not in visited:
                visited.add(e.target_id)
                remaining.append(graph.nodes[e.target_id])
    if len(hashes) != len(graph.nodes):
        missing = sorted(set(graph.nodes) - set(hashes))
        raise StreamGraphError(f"stream nodes {missing} are unreachable from the sources (cycle?)")
    return hashes


# ----------------------------------------------------------------------------- generation
def _pickle(obj: Any, what: str) -> bytes:
    try:
        return cloudpickle.dumps(obj)
    except Exception as e:  # noqa: BLE001 - any pickling failure is the user's function
        raise StreamGraphError(f"{what} cannot be serialized (cloudpickle): {type(e).__name__}: {e}") from None


def create_job_graph(graph: StreamGraph, job_id: str | None = None) -> JobGraph:
    """Chain ``graph`` into a JobGraph (see the module doc for the rules)."""
    if not graph.nodes:
        raise StreamGraphError("no operators defined in streaming topology; cannot build a job")
    order = graph.topological_order()
    topo_index = {n.id: i for i, n in enumerate(order)}
    hashes = compute_node_hashes(graph)

    # chain heads: sources, and targets of non-chainable edges (and multi-input nodes)
    heads = [n for n in order if not (len(n.in_edges) == 1 and graph.is_chainable(n.in_edges[0]))]

    chain_of: dict[int, int] = {}  # node -> head
    chain_nodes: dict[int, list[StreamNode]] = {}
    for head in heads:
        members: list[StreamNode] = []

        def walk(n: StreamNode) -> None:
            members.append(n)
            chain_of[n.id] = head.id
            for e in n.out_edges:
                if graph.is_chainable(e):
                    walk(graph.nodes[e.target_id])

        walk(head)
        chain_nodes[head.id] = members

    names: dict[int, str] = {}

    def chained_name(n: StreamNode) -> str:
        if n.id not in names:
            outs = [graph.nodes[e.target_id] for e in n.out_edges if graph.is_chainable(e)]
            if len(outs) > 1:
                names[n.id] = f"{n.name} -> ({', '.join(chained_name(o) for o in outs)})"
            elif len(outs) == 1:
                names[n.id] = f"{n.name} -> {chained_name(outs[0])}"
            else:
                names[n.id] = n.name
        return names[n.id]

    vertex_id = {h.id: hashes[h.id].hex() for h in heads}
    datasets: list[IntermediateDataSet] = []
    job_edges: list[JobEdge] = []
    dataset_of_edge: dict[int, str] = {}  # id(StreamEdge) -> dataset id
    result_type = _result_type(graph)

    heads.sort(key=lambda h: topo_index[h.id])
    for head in heads:
        for n in chain_nodes[head.id]:
            for idx, e in enumerate(n.out_edges):
                if graph.is_chainable(e):
                    continue
                ds_id = _hash("dataset", hashes[e.source_id].hex(), hashes[e.target_id].hex(), idx).hex()
                dataset_of_edge[id(e)] = ds_id
                datasets.append(IntermediateDataSet(id=ds_id, producer=vertex_id[head.id], result_type=result_type))

    vertices: list[JobVertex] = []
    for head in heads:
        members = chain_nodes[head.id]
        ops = []
        for n in members:
            ops.append(
                OperatorDescriptor(
                    node_id=n.id,
                    name=n.name,
                    kind=n.kind,
                    spec=_pickle(n.spec, f"operator {n.label()}"),
                    uid=n.uid,
                    chained_outputs=[e.target_id for e in n.out_edges if graph.is_chainable(e)],
                    output_datasets=[dataset_of_edge[id(e)] for e in n.out_edges if not graph.is_chainable(e)],
                )
            )
        vertices.append(
            JobVertex(
                id=vertex_id[head.id],
                name=chained_name(head),
                parallelism=head.parallelism,
                max_parallelism=_vertex_max_parallelism(graph, head, members),
                operators=ops,
                slot_sharing_group=head.slot_sharing_group,
                parallelism_configured=any(n.parallelism_configured for n in members),
            )
        )

    # job edges, in order of consuming vertex, then of the input edges
    for head in heads:
        for e in head.in_edges:
            job_edges.append(
                JobEdge(
                    source=dataset_of_edge[id(e)],
                    target=vertex_id[head.id],
                    partitioning=e.partitioning,
                    key_selector=(
                        _pickle(e.key_selector, f"key selector of {graph.nodes[e.target_id].label()}")
                        if e.key_selector is not None
                        else None
                    ),
                )
            )

    return JobGraph(
        job_id=job_id or new_id(),
        job_name=graph.job_name,
        vertices=vertices,
        datasets=datasets,
        edges=job_edges,
        runtime_mode=graph.runtime_mode,
        config=dict(graph.config),
        slot_sharing_groups=_slot_sharing_group_resources(graph),
    )


def _slot_sharing_group_resources(graph: StreamGraph) -> dict[str, dict[str, float]]:
    """The resources of the slot sharing groups given as SlotSharingGroup objects with resources."""
    out: dict[str, dict[str, float]] = {}
    for name, ssg in graph.slot_sharing_groups.items():
        res = {
            key: float(value)
            for key, value in (
                ("cpuCores", ssg.cpu_cores),
                ("taskHeapMemoryMB", ssg.task_heap_memory_mb),
                ("taskOffHeapMemoryMB", ssg.task_off_heap_memory_mb),
                ("managedMemoryMB", ssg.managed_memory_mb),
            )
            if value is not None
        }
        if res:
            out[name] = res
    return out


def _result_type(graph: StreamGraph) -> str:
    if graph.runtime_mode != "BATCH":
        return "PIPELINED_BOUNDED"
    mode = ExecutionOptions.BATCH_SHUFFLE_MODE.read(graph.config)
    return "PIPELINED_BOUNDED" if mode == "ALL_EXCHANGES_PIPELINED" else "BLOCKING"


def _vertex_max_parallelism(graph: StreamGraph, head: StreamNode, members: list[StreamNode]) -> int:
    explicit = [n.max_parallelism for n in members if n.max_parallelism is not None]
    if explicit:
        mp = explicit[0]
        where = f"operator {head.label()}"
    elif graph.max_parallelism is not None and graph.max_parallelism > 0:
        mp = graph.max_parallelism
        where = "the job (pipeline.max-parallelism / set_max_parallelism)"
    else:
        return compute_default_max_parallelism(head.parallelism)
    if head.parallelism > mp:
        raise StreamGraphError(
            f"the max parallelism {mp} of {where} is smaller than the parallelism "
            f"{head.parallelism} of {head.label()}; increase the max parallelism or decrease the parallelism"
        )
    return mp


def chainable_edges(graph: StreamGraph) -> list[StreamEdge]:
    return [e for e in graph.edges if graph.is_chainable(e)]
