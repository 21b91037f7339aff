"""The ``_metadata`` format (corruption is detected) and state assignment on restore
(rescaling, incompatible checkpoints)."""

from __future__ import annotations

import pytest

from yarnflink.checkpoint.assignment import RestoreVertex, assign_state, check_compatible
from yarnflink.checkpoint.metadata import (
    CheckpointMetadataError,
    CompletedCheckpoint,
    OperatorState,
    deserialize_metadata,
    serialize_metadata,
)
from yarnflink.common.keygroups import key_group_range
from yarnflink.state.handles import (
    ByteStreamStateHandle,
    FileStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorStateHandle,
    OperatorSubtaskState,
    StateMetaInfo,
)


def checkpoint(parallelism: int = 2, max_parallelism: int = 128) -> CompletedCheckpoint:
    subtasks = {}
    for i in range(parallelism):
        rng = KeyGroupRange.of(key_group_range(max_parallelism, parallelism, i))
        keyed = KeyGroupsStateHandle(
            rng, FileStateHandle(f"s3://b/job/chk-3/keyed-{i}.arrow", 4096), (StateMetaInfo("count", "value", True),)
        )
        op = OperatorStateHandle(
            ByteStreamStateHandle(f"op-{i}", b"\x00\x01binary"), {"offsets": ("SPLIT_DISTRIBUTE", (0, 1))}
        )
        subtasks[i] = OperatorSubtaskState([keyed], [op])
    return CompletedCheckpoint(
        "job",
        3,
        1234,
        {
            "window-op": OperatorState("window-op", parallelism, max_parallelism, subtasks),
            "sink-op": OperatorState("sink-op", parallelism, max_parallelism, {}),
        },
        external_pointer="s3://b/job/chk-3",
    )


def test_metadata_round_trip() -> None:
    cp = checkpoint()
    back = deserialize_metadata(serialize_metadata(cp), "s3://b/job/chk-3/_metadata")
    assert back.to_json() == cp.to_json()
    assert (
        back.operator_states["window-op"].subtask_states[1].managed_operator_state[0].delegate.data == b"\x00\x01binary"
    )


@pytest.mark.parametrize(
    "damage,problem",
    [
        (lambda d: b"", "the file is empty"),
        (lambda d: d[:10], "truncated"),
        (lambda d: d[:-3], "truncated"),
        (lambda d: b"PK\x03\x04" + d[4:], "not a yarnflink checkpoint metadata file"),
        (lambda d: d[:20] + bytes([d[20] ^ 1]) + d[21:], "checksum mismatch"),
        (lambda d: d[:4] + b"\x00\x09" + d[6:], "unsupported metadata format version 9"),
    ],
)
def test_damaged_metadata_is_reported_with_its_path(damage, problem) -> None:  # type: ignore[no-untyped-def]
    data = damage(serialize_metadata(checkpoint()))
    with pytest.raises(CheckpointMetadataError) as e:
        deserialize_metadata(data, "file:///chk/job/chk-3/_metadata")
    assert str(e.value).startswith("checkpoint metadata file:///chk/job/chk-3/_metadata: ")
    assert problem in str(e.value)


def test_rescaled_restore_gives_each_subtask_the_intersecting_key_groups() -> None:
    assigned = assign_state(checkpoint(2), [RestoreVertex("v", 3, 128, ("window-op", "sink-op"))])
    for i in range(3):
        mine = KeyGroupRange.of(key_group_range(128, 3, i))
        handles = assigned[("v", i)].get("window-op").managed_keyed_state
        assert handles and all(len(h.key_group_range.intersection(mine)) for h in handles)
    assert [len(assigned[("v", i)].get("window-op").managed_keyed_state) for i in range(3)] == [1, 2, 1]
    ops = [assigned[("v", i)].get("window-op").managed_operator_state for i in range(3)]
    assert sorted(len(idx) for o in ops for h in o for _, idx in h.states.values()) == [1, 1, 2]


def test_incompatible_checkpoints_are_refused_with_the_path_and_the_problem() -> None:
    cp = checkpoint()
    with pytest.raises(CheckpointMetadataError) as e:
        assign_state(cp, [RestoreVertex("v", 2, 256, ("window-op",))])
    assert str(e.value).startswith(
        "checkpoint metadata s3://b/job/chk-3: operator window-op was checkpointed "
        "with max parallelism 128 but the job has max parallelism 256"
    )
    problem = check_compatible(cp, [RestoreVertex("v", 2, 128, ("other-op",))])
    assert problem is not None and "state of operator(s) window-op that the job does not contain" in problem
    assert "execution.savepoint.ignore-unclaimed-state" in problem
    assert assign_state(cp, [RestoreVertex("v", 2, 128, ("other-op",))], allow_non_restored_state=True) == {}
