"""Slot sharing (seed 000, figure 5): subtasks of different JobVertices in one slot sharing group
may share a slot; two subtasks of the same JobVertex never do. A group needs as many slots as its
highest parallelism. Pure: ExecutionGraph in, the shared slots out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionVertex
from yarnflink.scheduler.regions import logical_regions


@dataclass(eq=False)
class ExecutionSlotSharingGroup:
    """The subtasks that will run in one (shared) slot."""

    group_name: str
    index: int
    vertices: list[ExecutionVertex] = field(default_factory=list)
    region: int = 0  # logical pipelined region (only set when slots are shared per region)

    @property
    def key(self) -> str:
        """Names the group's slot request in the SlotPool."""
        return f"{self.group_name}/{self.region}/{self.index}"


def compute_slot_sharing(eg: ExecutionGraph, per_region: bool = False) -> list[ExecutionSlotSharingGroup]:
    """Subtask i of every vertex in a group goes to the group's i-th shared slot, so a chain of
    pipelined vertices with equal parallelism (forward exchanges) stays in one slot.

    ``per_region``: a slot sharing group does not span blocking exchanges (Flink puts each
    logical pipelined region of a BATCH job in a slot sharing group of its own), so a region's
    slots are given back when it ends and the next region reuses them."""
    regions = logical_regions(eg.job_graph) if per_region else {}
    groups: dict[tuple[str, int], list[ExecutionSlotSharingGroup]] = {}
    for ejv in eg.job_vertices:
        name = ejv.job_vertex.slot_sharing_group
        region = regions.get(ejv.id, 0)
        slots = groups.setdefault((name, region), [])
        for ev in ejv.task_vertices:
            while len(slots) <= ev.subtask_index:
                slots.append(ExecutionSlotSharingGroup(name, len(slots), region=region))
            slots[ev.subtask_index].vertices.append(ev)
    return [s for slots in groups.values() for s in slots]
