"""Slot sharing (seed 000, figure 5): subtasks of different JobVertices in one slot sharing group
may share a slot; two subtasks of the same JobVertex never do. A group needs as many slots as its
highest parallelism. Pure: ExecutionGraph in, the shared slots out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yarnflink.executiongraph.executiongraph import ExecutionGraph, ExecutionVertex


@dataclass
class ExecutionSlotSharingGroup:
    """The subtasks that will run in one (shared) slot."""

    group_name: str
    index: int
    vertices: list[ExecutionVertex] = field(default_factory=list)


def compute_slot_sharing(eg: ExecutionGraph) -> list[ExecutionSlotSharingGroup]:
    """Subtask i of every vertex in a group goes to the group's i-th shared slot, so a chain of
    pipelined vertices with equal parallelism (forward exchanges) stays in one slot."""
    groups: dict[str, list[ExecutionSlotSharingGroup]] = {}
    for ejv in eg.job_vertices:
        name = ejv.job_vertex.slot_sharing_group
        slots = groups.setdefault(name, [])
        for ev in ejv.task_vertices:
            while len(slots) <= ev.subtask_index:
                slots.append(ExecutionSlotSharingGroup(name, len(slots)))
            slots[ev.subtask_index].vertices.append(ev)
    return [s for slots in groups.values() for s in slots]
