"""Which subtask restores which state (Flink's ``StateAssignmentOperation``), pure logic.

Given a completed checkpoint or savepoint and the vertices of the job that restores it:

* keyed state: new subtask i gets every keyed handle whose key-group range intersects its own
  (``key_group_range(max_parallelism, parallelism, i)``); its backend keeps its key groups;
* operator list state (SPLIT_DISTRIBUTE): unchanged parallelism (and no union state) keeps each
  subtask's elements; otherwise all elements, in old subtask order, are cut into ``parallelism`` contiguous parts;
* union list state: every new subtask gets all elements.

It refuses a checkpoint that does not fit the job, naming the checkpoint and the problem: an
operator whose max parallelism changed (its key groups would move), or state of an operator the
job does not have (unless ``allow_non_restored_state``, Flink's
``execution.savepoint.ignore-unclaimed-state``).
"""

from __future__ import annotations

from dataclasses import dataclass

from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint, OperatorState
from yarnflink.common.keygroups import key_group_range
from yarnflink.state.handles import (
    SPLIT_DISTRIBUTE,
    UNION,
    KeyedStateHandle,
    KeyGroupRange,
    OperatorStateHandle,
    OperatorSubtaskState,
    TaskStateSnapshot,
)


@dataclass(frozen=True)
class RestoreVertex:
    vertex_id: str
    parallelism: int
    max_parallelism: int
    operator_ids: tuple[str, ...]


def assign_state(
    checkpoint: CompletedCheckpoint,
    vertices: list[RestoreVertex],
    allow_non_restored_state: bool = False,
) -> dict[tuple[str, int], TaskStateSnapshot]:
    """``(vertex_id, subtask_index) -> TaskStateSnapshot`` to restore (subtasks without state
    are absent)."""
    where = checkpoint.external_pointer or f"checkpoint {checkpoint.checkpoint_id} of job {checkpoint.job_id}"
    owner: dict[str, RestoreVertex] = {}
    for vertex in vertices:
        for op in vertex.operator_ids:
            owner[op] = vertex
    unclaimed = [op for op, st in checkpoint.operator_states.items() if op not in owner and st.subtask_states]
    if unclaimed and not allow_non_restored_state:
        raise CheckpointMetadataError(
            where,
            f"it has state of operator(s) {', '.join(sorted(unclaimed))} that the job does not contain "
            "(the savepoint is from another job, or operators changed their uid); set "
            "execution.savepoint.ignore-unclaimed-state: true to skip that state",
        )
    out: dict[tuple[str, int], TaskStateSnapshot] = {}
    for op_id, st in sorted(checkpoint.operator_states.items()):
        v = owner.get(op_id)
        if v is None or not st.subtask_states:
            continue
        has_keyed = any(s.managed_keyed_state for s in st.subtask_states.values())
        if has_keyed and st.max_parallelism != v.max_parallelism:
            raise CheckpointMetadataError(
                where,
                f"operator {op_id} was checkpointed with max parallelism {st.max_parallelism} but the job "
                f"has max parallelism {v.max_parallelism}; keyed state cannot be restored with another "
                "max parallelism",
            )
        if has_keyed and v.parallelism > v.max_parallelism:
            raise CheckpointMetadataError(
                where, f"operator {op_id}: parallelism {v.parallelism} exceeds max parallelism {v.max_parallelism}"
            )
        has_channel_state = any(s.input_channel_state for s in st.subtask_states.values())
        if has_channel_state and st.parallelism != v.parallelism:
            raise CheckpointMetadataError(
                where,
                f"operator {op_id} has in-flight data of an unaligned checkpoint (input channel state), "
                f"which cannot be rescaled: it was checkpointed with parallelism {st.parallelism}, the job "
                f"has parallelism {v.parallelism}; restore with the same parallelism, or rescale from an "
                "aligned checkpoint or savepoint",
            )
        keyed = _assign_keyed(st, v)
        operator = _assign_operator(st, v.parallelism)
        for i in range(v.parallelism):
            channels = (
                list(st.subtask_states[i].input_channel_state) if (has_channel_state and i in st.subtask_states) else []
            )
            sub = OperatorSubtaskState(keyed[i], operator[i], channels)
            if not sub.is_empty():
                snap = out.setdefault((v.vertex_id, i), TaskStateSnapshot())
                snap.subtask_states[op_id] = sub
    return out


def _assign_keyed(st: OperatorState, v: RestoreVertex) -> list[list[KeyedStateHandle]]:
    handles = [h for _, s in sorted(st.subtask_states.items()) for h in s.managed_keyed_state]
    result: list[list[KeyedStateHandle]] = []
    for i in range(v.parallelism):
        rng = KeyGroupRange.of(key_group_range(v.max_parallelism, v.parallelism, i))
        result.append([h for h in handles if len(h.key_group_range.intersection(rng))])
    return result


def _assign_operator(st: OperatorState, parallelism: int) -> list[list[OperatorStateHandle]]:
    subtasks = sorted(st.subtask_states.items())
    result: list[list[OperatorStateHandle]] = [[] for _ in range(parallelism)]
    old_parallelism = st.parallelism
    has_union = any(
        mode == UNION for _, s in subtasks for h in s.managed_operator_state for mode, _ in h.states.values()
    )
    if old_parallelism == parallelism and not has_union:  # (Flink: union state is always redistributed)
        for i, s in subtasks:
            if i < parallelism:
                result[i] = list(s.managed_operator_state)
        return result
    # per state name: all (handle, element index) in old subtask order
    split: dict[str, list[tuple[OperatorStateHandle, int]]] = {}
    union: dict[str, list[tuple[OperatorStateHandle, int]]] = {}
    for _, s in subtasks:
        for h in s.managed_operator_state:
            for name, (mode, idx) in h.states.items():
                target = union if mode == UNION else split
                target.setdefault(name, []).extend((h, i) for i in idx)
    per_subtask: list[dict[OperatorStateHandle, dict[str, tuple[str, list[int]]]]] = [{} for _ in range(parallelism)]

    def give(sub: int, name: str, mode: str, items: list[tuple[OperatorStateHandle, int]]) -> None:
        for h, i in items:
            per_subtask[sub].setdefault(h, {}).setdefault(name, (mode, []))[1].append(i)

    for name, items in split.items():
        n = len(items)
        start = 0
        for sub in range(parallelism):
            size = n // parallelism + (1 if sub < n % parallelism else 0)
            give(sub, name, SPLIT_DISTRIBUTE, items[start : start + size])
            start += size
    for name, items in union.items():
        for sub in range(parallelism):
            give(sub, name, UNION, items)
    for sub in range(parallelism):
        result[sub] = [
            h.with_states({name: (mode, tuple(idx)) for name, (mode, idx) in states.items()})
            for h, states in per_subtask[sub].items()
        ]
    return result


def check_compatible(
    checkpoint: CompletedCheckpoint, vertices: list[RestoreVertex], allow_non_restored_state: bool = False
) -> str | None:
    """None if the checkpoint can be restored by the job, else the problem (for validation
    before scheduling)."""
    try:
        assign_state(checkpoint, vertices, allow_non_restored_state)
    except CheckpointMetadataError as e:
        return str(e)
    return None
