"""Operator list and union state: snapshot, redistribution on rescale, restore."""

from __future__ import annotations

import pytest

from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
from yarnflink.state import ListStateDescriptor, OperatorStateBackend, OperatorSubtaskState, StateMigrationError


def checkpoint_of(backends: list[OperatorStateBackend]) -> CompletedCheckpoint:
    subtasks = {}
    for i, b in enumerate(backends):
        handle = b.snapshot(1).result().operator
        subtasks[i] = OperatorSubtaskState(managed_operator_state=[handle])
    return CompletedCheckpoint("job", 1, 0, {"src": OperatorState("src", len(backends), 128, subtasks)})


def restore(cp: CompletedCheckpoint, parallelism: int) -> list[OperatorStateBackend]:
    assigned = assign_state(cp, [RestoreVertex("v", parallelism, 128, ("src",))])
    out = []
    for i in range(parallelism):
        b = OperatorStateBackend()
        snap = assigned.get(("v", i))
        if snap is not None:
            b.restore(snap.get("src").managed_operator_state)
        out.append(b)
    return out


def old_backends() -> list[OperatorStateBackend]:
    olds = []
    for i in range(2):
        b = OperatorStateBackend()
        b.get_list_state(ListStateDescriptor("offsets")).update([f"split-{i}-{j}" for j in range(3)])
        b.get_union_list_state(ListStateDescriptor("epoch")).add(f"epoch-{i}")
        olds.append(b)
    return olds


@pytest.mark.parametrize("parallelism", [1, 2, 3, 4])
def test_list_state_is_split_and_union_state_is_broadcast_on_rescale(parallelism: int) -> None:
    news = restore(checkpoint_of(old_backends()), parallelism)
    parts = [b.get_list_state(ListStateDescriptor("offsets")).get() for b in news]
    everything = sorted(f"split-{i}-{j}" for i in range(2) for j in range(3))
    assert sorted(x for p in parts for x in p) == everything  # each element exactly once
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # evenly
    for b in news:
        assert sorted(b.get_union_list_state(ListStateDescriptor("epoch")).get()) == ["epoch-0", "epoch-1"]


def test_unchanged_parallelism_keeps_each_subtasks_elements() -> None:
    news = restore(checkpoint_of(old_backends()), 2)
    for i, b in enumerate(news):
        assert b.get_list_state(ListStateDescriptor("offsets")).get() == [f"split-{i}-{j}" for j in range(3)]


def test_mode_of_a_restored_state_cannot_change() -> None:
    news = restore(checkpoint_of(old_backends()), 2)
    with pytest.raises(StateMigrationError, match="checkpointed as UNION state"):
        news[0].get_list_state(ListStateDescriptor("epoch"))


def test_unread_restored_state_survives_the_next_snapshot() -> None:
    news = restore(checkpoint_of(old_backends()), 1)
    again = restore(checkpoint_of(news), 1)  # nobody asked for the states in between
    assert len(again[0].get_list_state(ListStateDescriptor("offsets")).get()) == 6
