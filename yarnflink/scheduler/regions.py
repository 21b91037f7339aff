"""Pipelined regions (seed 000, "Error Recovery"): the subtasks joined by pipelined exchanges.

Tasks connected by a pipelined exchange must run at the same time, so they are scheduled and
restarted together; a blocking exchange is a region boundary: its producer writes the whole
result first, and the consumer region starts (or restarts) later and reads it from the producer's
TaskExecutor. A forward exchange joins subtask i with subtask i; every other partitioning joins
every producer subtask with every consumer subtask. Pure: ExecutionGraph in, regions out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yarnflink.executiongraph.executiongraph import (
    POINTWISE,
    ExecutionGraph,
    ExecutionVertex,
    IntermediateResultPartition,
)
from yarnflink.jobgraph.jobgraph import JobGraph


@dataclass(eq=False)
class PipelinedRegion:
    index: int  # regions are numbered in topological order of their first vertex
    vertices: list[ExecutionVertex] = field(default_factory=list)  # topological order
    #: Blocking partitions produced outside the region that its vertices read.
    consumed: list[IntermediateResultPartition] = field(default_factory=list)
    #: Blocking partitions its vertices produce (read by other regions).
    produced: list[IntermediateResultPartition] = field(default_factory=list)

    def __repr__(self) -> str:
        names = ", ".join(v.task_name_with_subtask for v in self.vertices[:4])
        more = f", ... {len(self.vertices) - 4} more" if len(self.vertices) > 4 else ""
        return f"PipelinedRegion({self.index}: {names}{more})"


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


class RegionTopology:
    """The pipelined regions of an ExecutionGraph and the blocking partitions between them."""

    def __init__(self, eg: ExecutionGraph) -> None:
        self.eg = eg
        vertices = list(eg.all_vertices())
        position = {id(v): i for i, v in enumerate(vertices)}
        uf = _UnionFind(len(vertices))
        jg = eg.job_graph
        for edge in jg.edges:
            dataset = jg.dataset(edge.source)
            if dataset.result_type == "BLOCKING":
                continue
            producers = eg.vertex(dataset.producer).task_vertices
            consumers = eg.vertex(edge.target).task_vertices
            if edge.partitioning in POINTWISE:
                for p, c in zip(producers, consumers):
                    uf.union(position[id(p)], position[id(c)])
            else:  # all-to-all: one chain of unions joins them all
                first = position[id(producers[0])]
                for v in (*producers[1:], *consumers):
                    uf.union(first, position[id(v)])
        by_root: dict[int, PipelinedRegion] = {}
        self.regions: list[PipelinedRegion] = []
        self._region_of: dict[int, PipelinedRegion] = {}
        for i, v in enumerate(vertices):  # vertices are in topological order
            root = uf.find(i)
            region = by_root.get(root)
            if region is None:
                region = by_root[root] = PipelinedRegion(len(self.regions))
                self.regions.append(region)
            region.vertices.append(v)
            self._region_of[id(v)] = region
        for region in self.regions:
            members = {id(v) for v in region.vertices}
            for v in region.vertices:
                for partition in eg.consumed_partitions(v):
                    if (
                        partition.blocking
                        and id(partition.producer) not in members
                        and partition not in region.consumed
                    ):
                        region.consumed.append(partition)
                region.produced.extend(rp for rp in v.produced.values() if rp.blocking)

    def region_of(self, ev: ExecutionVertex) -> PipelinedRegion:
        return self._region_of[id(ev)]

    def consumer_regions(self, partition: IntermediateResultPartition) -> list[PipelinedRegion]:
        out: list[PipelinedRegion] = []
        for c in self.eg.consumers_of(partition):
            r = self.region_of(c)
            if r not in out:
                out.append(r)
        return out


def logical_regions(job_graph: JobGraph) -> dict[str, int]:
    """JobVertex id -> index of its logical pipelined region (JobVertices joined by pipelined
    exchanges). In BATCH jobs each logical region gets slot sharing groups of its own, so slots
    are reused region after region instead of being held for the whole job."""
    index = {v.id: i for i, v in enumerate(job_graph.vertices)}
    uf = _UnionFind(len(index))
    for edge in job_graph.edges:
        dataset = job_graph.dataset(edge.source)
        if dataset.result_type != "BLOCKING":
            uf.union(index[dataset.producer], index[edge.target])
    return {vid: uf.find(i) for vid, i in index.items()}
