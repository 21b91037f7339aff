"""Failover strategies (``jobmanager.execution.failover-strategy``): which ExecutionVertices a
failure restarts. Pure: a failed vertex (and the upstream partition it could not read, if that was
the cause) in, the set of vertices to restart out.

* ``full``: every vertex.
* ``individual``: only the failed vertex; accepted only for jobs whose tasks exchange no data
  (seed 000, figure 9), see ``check_failover_strategy``.
* ``region`` (seed 000, figures 10 and 11): the failed vertex's pipelined region. A region that
  restarts also restarts

  - the producer regions of blocking partitions it needs that are no longer available (lost with
    their TaskExecutor, or released) -- and the producer region of the partition whose reading
    failed;
  - every consumer region of its blocking outputs when the output is partitioned
    non-deterministically (``rebalance``, ``shuffle``, ``rescale``): the new attempt sends records
    to other consumers than the old one did, so results already computed from the old output,
    finished or not, are wrong. Such consumer regions pass the rule on: their own outputs change
    too, whatever their partitioning;
  - with a deterministic partitioning (``hash``/key_by, ``broadcast``, ``forward``) only the
    consumer regions still running (they are reading the output being replaced); finished ones
    keep their results.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Protocol

from yarnflink.executiongraph.executiongraph import (
    ExecutionGraph,
    ExecutionState,
    ExecutionVertex,
    IntermediateResultPartition,
)
from yarnflink.jobgraph.jobgraph import DETERMINISTIC_PARTITIONINGS, JobGraph
from yarnflink.scheduler.regions import PipelinedRegion, RegionTopology

FAILOVER_STRATEGIES = ("full", "individual", "region")

#: States of an attempt that has been scheduled and not ended (it holds or awaits a slot).
_ACTIVE = frozenset(
    {
        ExecutionState.SCHEDULED,
        ExecutionState.DEPLOYING,
        ExecutionState.INITIALIZING,
        ExecutionState.RUNNING,
        ExecutionState.CANCELING,
    }
)


class FailoverStrategy(Protocol):
    name: str

    def tasks_to_restart(
        self, failed: ExecutionVertex, lost: IntermediateResultPartition | None = None
    ) -> set[ExecutionVertex]: ...


class RestartAllFailoverStrategy:
    name = "full"

    def __init__(self, eg: ExecutionGraph) -> None:
        self.eg = eg

    def tasks_to_restart(
        self, failed: ExecutionVertex, lost: IntermediateResultPartition | None = None
    ) -> set[ExecutionVertex]:
        return set(self.eg.all_vertices())


class RestartIndividualFailoverStrategy:
    name = "individual"

    def tasks_to_restart(
        self, failed: ExecutionVertex, lost: IntermediateResultPartition | None = None
    ) -> set[ExecutionVertex]:
        return {failed} if lost is None else {failed, lost.producer}


class RestartPipelinedRegionFailoverStrategy:
    name = "region"

    def __init__(self, topology: RegionTopology, is_available: Callable[[IntermediateResultPartition], bool]) -> None:
        self.topology = topology
        self.is_available = is_available

    def regions_to_restart(
        self, failed: ExecutionVertex, lost: IntermediateResultPartition | None = None
    ) -> list[PipelinedRegion]:
        topo = self.topology
        # region -> whether its output changes (it was restarted for a non-deterministic input)
        visited: dict[PipelinedRegion, bool] = {}
        todo: deque[tuple[PipelinedRegion, bool]] = deque([(topo.region_of(failed), False)])
        if lost is not None:
            todo.append((topo.region_of(lost.producer), False))
        while todo:
            region, changes_output = todo.popleft()
            if region in visited and (visited[region] or not changes_output):
                continue
            visited[region] = changes_output
            for p in region.consumed:
                if p is lost or not self.is_available(p):
                    todo.append((topo.region_of(p.producer), False))
            for p in region.produced:
                nondeterministic = changes_output or p.partitioning not in DETERMINISTIC_PARTITIONINGS
                for consumer in self.topology.eg.consumers_of(p):
                    if nondeterministic:
                        todo.append((topo.region_of(consumer), True))
                    elif consumer.current.state in _ACTIVE:
                        todo.append((topo.region_of(consumer), False))
        return sorted(visited, key=lambda r: r.index)

    def tasks_to_restart(
        self, failed: ExecutionVertex, lost: IntermediateResultPartition | None = None
    ) -> set[ExecutionVertex]:
        return {v for r in self.regions_to_restart(failed, lost) for v in r.vertices}


def check_failover_strategy(name: str, job_graph: JobGraph) -> None:
    """Raises ValueError if ``name`` cannot run ``job_graph`` (unknown, or ``individual`` for a
    job whose tasks exchange data)."""
    if name not in FAILOVER_STRATEGIES:
        raise ValueError(
            f"unknown jobmanager.execution.failover-strategy {name!r}; expected one of {', '.join(FAILOVER_STRATEGIES)}"
        )
    if name == "individual" and job_graph.edges:
        producers = {job_graph.dataset(e.source).producer for e in job_graph.edges}
        names = ", ".join(v.name for v in job_graph.vertices if v.id in producers)
        raise ValueError(
            "jobmanager.execution.failover-strategy 'individual' restarts a failed task alone, which "
            f"is only possible when tasks exchange no data; this job has {len(job_graph.edges)} "
            f"exchange(s) (from {names}). Use 'region' or 'full'."
        )


def create_failover_strategy(
    name: str, eg: ExecutionGraph, topology: RegionTopology, is_available: Callable[[IntermediateResultPartition], bool]
) -> FailoverStrategy:
    check_failover_strategy(name, eg.job_graph)
    if name == "full":
        return RestartAllFailoverStrategy(eg)
    if name == "individual":
        return RestartIndividualFailoverStrategy()
    return RestartPipelinedRegionFailoverStrategy(topology, is_available)
