"""Human and JSON descriptions of a JobGraph (``yarnflink info job.py [--json]``, REST plan).

Neither function unpickles anything: they use names, ids and partitionings only.
"""

from __future__ import annotations

from typing import Any

from yarnflink.jobgraph.jobgraph import JobGraph, JobVertex

SHIP_STRATEGY = {
    "forward": "FORWARD",
    "rebalance": "REBALANCE",
    "shuffle": "SHUFFLE",
    "broadcast": "BROADCAST",
    "hash": "HASH",
    "rescale": "RESCALE",
}


def _inputs(jg: JobGraph, v: JobVertex) -> list[tuple[JobVertex, str, str]]:
    """(producer vertex, partitioning, result type) per input edge of ``v``."""
    out = []
    for e in jg.inputs_of(v.id):
        ds = jg.dataset(e.source)
        out.append((jg.vertex(ds.producer), e.partitioning, ds.result_type))
    return out


def _operator_tree(v: JobVertex) -> list[str]:
    """Chained operators as an indented tree (head first)."""
    by_id = {o.node_id: o for o in v.operators}
    lines: list[str] = []

    def walk(node_id: int, depth: int) -> None:
        o = by_id[node_id]
        uid = f", uid {o.uid!r}" if o.uid else ""
        lines.append(f"{'    ' * depth}{'+- ' if depth else ''}[{o.node_id}] {o.name} ({o.kind}{uid})")
        for c in o.chained_outputs:
            walk(c, depth + 1)

    walk(v.head.node_id, 0)
    return lines


def describe_job_graph(jg: JobGraph) -> str:
    """A readable description: one block per vertex (chained operators, parallelism, max
    parallelism, slot sharing group, inputs with partitioning), then the edges."""
    index = {v.id: i + 1 for i, v in enumerate(jg.vertices)}
    lines = [
        f"Job '{jg.job_name}' ({jg.runtime_mode}), id {jg.job_id}",
        f"{len(jg.vertices)} vertices, {len(jg.edges)} edges",
        "",
    ]
    for v in jg.vertices:
        lines.append(f"Vertex {index[v.id]}: {v.name}")
        lines.append(f"  id:                 {v.id}")
        lines.append(f"  parallelism:        {v.parallelism}")
        lines.append(f"  max parallelism:    {v.max_parallelism}")
        lines.append(f"  slot sharing group: {v.slot_sharing_group}")
        lines.append(f"  operators ({len(v.operators)}):")
        lines.extend("    " + line for line in _operator_tree(v))
        ins = _inputs(jg, v)
        if ins:
            lines.append("  inputs:")
            for producer, part, rt in ins:
                lines.append(f"    <- vertex {index[producer.id]} ({producer.name}) {SHIP_STRATEGY[part]}, {rt}")
        lines.append("")
    if jg.edges:
        lines.append("Edges:")
        for e in jg.edges:
            ds = jg.dataset(e.source)
            lines.append(
                f"  vertex {index[ds.producer]} '{jg.vertex(ds.producer).name}' "
                f"--{SHIP_STRATEGY[e.partitioning]}--> vertex {index[e.target]} '{jg.vertex(e.target).name}'"
            )
    return "\n".join(lines).rstrip() + "\n"


def job_graph_summary_json(jg: JobGraph) -> dict[str, Any]:
    """Flink's ``/jobs/:id/plan`` shape:
    ``{"jid","name","type","nodes":[{"id","parallelism","operator","description",
    "inputs":[{"num","id","ship_strategy","exchange"}]}]}`` plus yarnflink's extra node fields
    ``max_parallelism``, ``slot_sharing_group`` and ``operators`` (names, head first)."""
    nodes = []
    for v in jg.vertices:
        node: dict[str, Any] = {
            "id": v.id,
            "parallelism": v.parallelism,
            "operator": v.name,
            "operator_strategy": "",
            "description": v.name,
            "optimizer_properties": {},
            "max_parallelism": v.max_parallelism,
            "slot_sharing_group": v.slot_sharing_group,
            "operators": [o.name for o in v.operators],
        }
        inputs = []
        for num, e in enumerate(jg.inputs_of(v.id)):
            ds = jg.dataset(e.source)
            inputs.append(
                {
                    "num": num,
                    "id": ds.producer,
                    "ship_strategy": SHIP_STRATEGY[e.partitioning],
                    "exchange": ds.result_type.lower(),
                }
            )
        node["inputs"] = inputs  # Flink omits it for sources; we always include it
        nodes.append(node)
    return {"jid": jg.job_id, "name": jg.job_name, "type": jg.runtime_mode, "nodes": nodes}
