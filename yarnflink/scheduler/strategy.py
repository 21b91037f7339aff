"""Scheduling strategies (seed 000, figure 7): which ExecutionVertices to deploy, and when.

* ``EagerSchedulingStrategy`` (streaming): every vertex at once when the job starts; a restart
  redeploys the restarted vertices at once.
* ``PipelinedRegionSchedulingStrategy`` (batch, Flink's Lazy_From_Source): pipelined regions in
  topological order from the sources. A region is scheduled when every blocking partition it
  reads is complete; the source regions start the job.

Both return *deployment batches*: lists of vertices the scheduler deploys together once all of
them have slots (a region's pipelined producers and consumers must know each other's locations).
Pure: events in, batches out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from yarnflink.executiongraph.executiongraph import (
    ExecutionGraph,
    ExecutionState,
    ExecutionVertex,
    IntermediateResultPartition,
)
from yarnflink.scheduler.regions import PipelinedRegion, RegionTopology

Batch = list[ExecutionVertex]


class SchedulingStrategy(Protocol):
    name: str

    def start(self) -> list[Batch]: ...

    def on_finished(self, ev: ExecutionVertex) -> list[Batch]: ...

    def restart(self, vertices: Iterable[ExecutionVertex]) -> list[Batch]: ...


def _topological(eg: ExecutionGraph, vertices: Iterable[ExecutionVertex]) -> Batch:
    chosen = set(map(id, vertices))
    return [v for v in eg.all_vertices() if id(v) in chosen]


class EagerSchedulingStrategy:
    name = "eager"

    def __init__(self, eg: ExecutionGraph) -> None:
        self.eg = eg

    def start(self) -> list[Batch]:
        return [list(self.eg.all_vertices())]

    def on_finished(self, ev: ExecutionVertex) -> list[Batch]:
        return []

    def restart(self, vertices: Iterable[ExecutionVertex]) -> list[Batch]:
        batch = _topological(self.eg, vertices)
        return [batch] if batch else []


class PipelinedRegionSchedulingStrategy:
    name = "pipelined-region"

    def __init__(self, topology: RegionTopology, is_available: Callable[[IntermediateResultPartition], bool]) -> None:
        self.topology = topology
        self.is_available = is_available

    def _ready(self, region: PipelinedRegion) -> bool:
        return all(v.current.state == ExecutionState.CREATED for v in region.vertices) and all(
            self.is_available(p) for p in region.consumed
        )

    def start(self) -> list[Batch]:
        return [list(r.vertices) for r in self.topology.regions if self._ready(r)]

    def on_finished(self, ev: ExecutionVertex) -> list[Batch]:
        out: list[Batch] = []
        seen: set[int] = set()
        for p in ev.produced.values():
            if not p.blocking:
                continue
            for region in self.topology.consumer_regions(p):
                if region.index not in seen and self._ready(region):
                    seen.add(region.index)
                    out.append(list(region.vertices))
        return out

    def restart(self, vertices: Iterable[ExecutionVertex]) -> list[Batch]:
        regions = sorted({id(r): r for r in map(self.topology.region_of, vertices)}.values(), key=lambda r: r.index)
        return [list(r.vertices) for r in regions if self._ready(r)]
