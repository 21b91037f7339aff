"""Hand-built JobGraphs for tests of the runtime's pure parts."""

from __future__ import annotations

from yarnflink.jobgraph.jobgraph import IntermediateDataSet, JobEdge, JobGraph, JobVertex, OperatorDescriptor


def vid(name: str) -> str:
    return (name.encode().hex() + "0" * 32)[:32]


def job_graph(vertices: list[tuple[str, int, str]], edges: list[tuple[str, str, str]]) -> JobGraph:
    """vertices: (name, parallelism, slot sharing group); edges: (source name, target name, partitioning)."""
    jvs = []
    datasets, jedges = [], []
    outs: dict[str, list[str]] = {}
    for i, (src, dst, part) in enumerate(edges):
        ds = f"{i:032x}"
        datasets.append(IntermediateDataSet(ds, vid(src)))
        jedges.append(JobEdge(ds, vid(dst), part, b"ks" if part == "hash" else None))
        outs.setdefault(src, []).append(ds)
    for n, (name, p, group) in enumerate(vertices):
        op = OperatorDescriptor(n, name, "map", b"spec", output_datasets=outs.get(name, []))
        jvs.append(JobVertex(vid(name), name, p, 128, [op], group))
    return JobGraph("f" * 32, "test", jvs, datasets, jedges)
