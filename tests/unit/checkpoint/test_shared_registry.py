"""SharedStateRegistry (pure): reference counts of shared state files over retained checkpoints."""

from __future__ import annotations

import pytest

from yarnflink.checkpoint.metadata import (
    CompletedCheckpoint,
    OperatorState,
    deserialize_metadata,
    serialize_metadata,
)
from yarnflink.checkpoint.shared import SharedStateDiscardedError, SharedStateRegistry
from yarnflink.state.handles import (
    ByteStreamStateHandle,
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    OperatorSubtaskState,
    SharedFileHandle,
    StateMetaInfo,
)


def shared(name: str, size: int = 10) -> SharedFileHandle:
    return SharedFileHandle(f"file:///chk/job/shared/{name}", size, "sha256:" + "0" * 64, KeyGroupRange(0, 63), "delta")


def checkpoint(cid: int, *files: SharedFileHandle) -> CompletedCheckpoint:
    h = IncrementalKeyedStateHandle(KeyGroupRange(0, 127), cid, files, (), (StateMetaInfo("s", "value"),))
    op = OperatorState("op", 1, 128, {0: OperatorSubtaskState([h])})
    return CompletedCheckpoint("job", cid, 0, {"op": op})


def test_a_file_goes_when_no_registered_checkpoint_refers_to_it() -> None:
    r = SharedStateRegistry()
    base, d1, d2 = shared("base"), shared("d1"), shared("d2")
    r.register(1, [base, d1])
    r.register(2, [base, d1, d2])
    assert r.unregister(1) == []  # checkpoint 2 still refers to both
    assert r.checkpoints_of(base.path) == {2}
    assert sorted(h.path for h in r.unregister(2)) == sorted([base.path, d1.path, d2.path])
    assert len(r) == 0 and r.is_discarded(base.path)


def test_a_checkpoint_that_refers_to_a_discarded_file_is_refused_and_registers_nothing() -> None:
    r = SharedStateRegistry()
    old, new = shared("old"), shared("new")
    r.register(1, [old])
    r.unregister(1)
    with pytest.raises(SharedStateDiscardedError, match="shared/old.*let go when checkpoint 1"):
        r.register(3, [new, old])
    assert new.path not in r and r.registered_checkpoints() == []


def test_a_path_registered_again_with_other_content_is_refused() -> None:
    r = SharedStateRegistry()
    r.register(1, [shared("f", 10)])
    with pytest.raises(SharedStateDiscardedError, match="registered as 10 bytes"):
        r.register(2, [shared("f", 11)])


def test_register_is_idempotent_and_unknown_names_files_never_seen() -> None:
    r = SharedStateRegistry()
    a, b, c = shared("a"), shared("b"), shared("c")
    r.register(1, [a])
    r.register(1, [a])
    r.register(2, [b])
    r.unregister(2)
    assert r.unknown([a, b, c, c]) == [c]  # a: registered, b: discarded (being deleted)
    assert [h.path for h in r.unregister(1)] == [a.path]


def test_rebuilt_from_retained_checkpoints_after_a_failover() -> None:
    base, d1, d2, d3 = shared("base"), shared("d1"), shared("d2"), shared("d3")
    retained = [checkpoint(7, base, d1, d2), checkpoint(8, base, d1, d2, d3)]
    # through the metadata format, as a new leader reads them
    read = [deserialize_metadata(serialize_metadata(c), f"/x/chk-{c.checkpoint_id}/_metadata") for c in retained]
    r = SharedStateRegistry.rebuilt(read)
    assert set(r.referenced()) == {base.path, d1.path, d2.path, d3.path}
    assert r.unregister(7) == []
    assert len(r.unregister(8)) == 4


def test_retention_lowered_frees_what_only_the_dropped_ones_used() -> None:
    files = [shared(f"f{i}") for i in range(6)]
    r = SharedStateRegistry()
    # checkpoints 1..5: a new base at 4
    r.register(1, files[0:1])
    r.register(2, files[0:2])
    r.register(3, files[0:3])
    r.register(4, files[3:4])
    r.register(5, files[3:5])
    freed = [h.path for cid in (1, 2, 3) for h in r.unregister(cid)]
    assert sorted(freed) == sorted(h.path for h in files[0:3])
    assert set(r.referenced()) == {files[3].path, files[4].path}


def test_metadata_round_trip_keeps_shared_and_private_handles() -> None:
    f = shared("x")
    h = IncrementalKeyedStateHandle(
        KeyGroupRange(0, 9), 4, (f,), (ByteStreamStateHandle("p", b"abc"),), (StateMetaInfo("s", "map"),), "rocksdb", 3
    )
    c = CompletedCheckpoint("job", 4, 0, {"op": OperatorState("op", 1, 10, {0: OperatorSubtaskState([h])})})
    back = deserialize_metadata(serialize_metadata(c), "/x/chk-4/_metadata")
    got = back.operator_states["op"].subtask_states[0].managed_keyed_state[0]
    assert got == h and back.shared_handles() == [f] and back.is_incremental
    assert back.stream_handles() == [ByteStreamStateHandle("p", b"abc")]  # shared files: not its own
    assert back.state_size == 13


def test_a_recovering_leader_deletes_shared_files_no_retained_checkpoint_refers_to() -> None:
    from yarnflink.checkpoint.cleanup import unreferenced_shared

    d = "s3://b/chk/job/shared/"
    files = [d + "chk3_op-0-63-chk3-base-aa.arrow", d + "chk7_op-0-63-chk7-delta-bb.arrow"]
    files += [d + "chk9_op-0-63-chk9-delta-cc.arrow", d + "chk12_op-0-63-chk12-delta-dd.arrow", d + "other.arrow"]
    # retained: 9 (refers to 3's base and its delta); 7 was freed by a deposed leader; 12 is
    # this leader's own (at or above the counter's value at its grant): it stays
    got = unreferenced_shared(files, {files[0], files[2]}, written_below=12)
    assert got == [files[1]]


def test_checkpointed_size_counts_only_what_an_incremental_checkpoint_wrote() -> None:
    h = IncrementalKeyedStateHandle(
        KeyGroupRange(0, 127), 5, (shared("base", 1000), shared("d5", 30)), (), (), "hashmap", 30
    )
    c = CompletedCheckpoint("job", 5, 0, {"op": OperatorState("op", 1, 128, {0: OperatorSubtaskState([h])})})
    assert (c.state_size, c.checkpointed_size) == (1030, 30)
