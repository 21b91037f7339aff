"""CheckpointCoordinator with incremental checkpoints: the SharedStateRegistry decides which
shared files go when checkpoints are subsumed, aborted or the job ends; cleanup.py's rules then
decide when (with HA: after the pointer is removed; a deposed master deletes nothing)."""

from __future__ import annotations

from tests.unit.checkpoint.test_coordinator import ALL, TASKS, config
from yarnflink.checkpoint import cleanup as cu
from yarnflink.checkpoint.coordinator import (
    FINALIZE_FAILURE,
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    CheckpointsRecovered,
    CheckpointUnrestorable,
    DeclineCheckpoint,
    DiscardCheckpoint,
    DiscardState,
    JobTerminated,
    MetadataWritten,
    NotifyCheckpointAborted,
    TaskRunning,
    Tick,
    WriteMetadata,
)
from yarnflink.state.handles import (
    FileStateHandle,
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    OperatorSubtaskState,
    SharedFileHandle,
    TaskStateSnapshot,
)

HASH = "sha256:" + "0" * 64


def f(name: str) -> SharedFileHandle:
    return SharedFileHandle(f"file:///chk/job/shared/{name}", 10, HASH, KeyGroupRange(0, 63), "delta")


def running(**kw) -> CheckpointCoordinator:  # type: ignore[no-untyped-def]
    c = CheckpointCoordinator("job", TASKS, config(**kw))
    for t in ALL:
        c.handle(TaskRunning(t))
    return c


def inc_state(task: str, cid: int, files: tuple[SharedFileHandle, ...]) -> TaskStateSnapshot:
    t = next(x for x in TASKS if x.task_id == task)
    h = IncrementalKeyedStateHandle(KeyGroupRange(0, 63), cid, files)
    return TaskStateSnapshot({t.operator_ids[0]: OperatorSubtaskState([h])})


def chains(cid: int, files: dict[str, tuple[SharedFileHandle, ...]], c: CheckpointCoordinator, now: int) -> list:
    c.handle(Tick(now))
    out: list = []
    for t in ALL:
        out = c.handle(AcknowledgeCheckpoint(cid, t, inc_state(t, cid, files.get(t, ())), now=now))
    return out


def complete(c: CheckpointCoordinator, cid: int, files: dict, now: int) -> list:
    write = chains(cid, files, c, now)
    assert [type(a) for a in write] == [WriteMetadata]
    return c.handle(MetadataWritten(cid, f"file:///chk/job/chk-{cid}", now))


def discarded_shared(actions: list) -> list[str]:
    return sorted(
        h.path.rsplit("/", 1)[1]
        for a in actions
        if isinstance(a, (DiscardCheckpoint, DiscardState))
        for h in (a.shared if isinstance(a, DiscardCheckpoint) else a.handles)
        if "/shared/" in h.path
    )


def test_shared_files_go_when_the_last_retained_checkpoint_referring_to_them_is_subsumed() -> None:
    c = running(num_retained=2)
    base, d2, d3, base4 = f("base"), f("d2"), f("d3"), f("base4")
    assert discarded_shared(complete(c, 1, {"win-0": (base,)}, 1000)) == []
    assert discarded_shared(complete(c, 2, {"win-0": (base, d2)}, 2000)) == []
    assert discarded_shared(complete(c, 3, {"win-0": (base, d2, d3)}, 3000)) == []  # 1 goes: base, d2 still used
    # a new base at 4: 2 goes (nothing freed: 3 refers to base, d2); then 5 subsumes 3: all old files go
    assert discarded_shared(complete(c, 4, {"win-0": (base4,)}, 4000)) == []
    assert discarded_shared(complete(c, 5, {"win-0": (base4,)}, 5000)) == ["base", "d2", "d3"]
    assert set(c.shared.referenced()) == {base4.path}


def test_a_checkpoint_referring_to_a_file_already_let_go_is_aborted_not_completed() -> None:
    c = running(num_retained=1)
    old, new = f("old"), f("new")
    complete(c, 1, {"win-0": (old,)}, 1000)
    assert discarded_shared(complete(c, 2, {"win-0": (new,)}, 2000)) == ["old"]
    # the backend of win-1 had not heard of 2's completion: it builds on 1's chain
    actions = chains(3, {"win-0": (new,), "win-1": (old,)}, c, 3000)
    abort = next(a for a in actions if isinstance(a, NotifyCheckpointAborted))
    assert FINALIZE_FAILURE in abort.reason and "shared/old" in abort.reason and "let go" in abort.reason
    assert not any(isinstance(a, WriteMetadata) for a in actions)
    assert discarded_shared(actions) == []  # new: still used by 2; old: already going
    assert [x.checkpoint_id for x in c.completed] == [2]


def test_an_aborted_checkpoint_deletes_its_new_shared_files_but_not_the_registered_ones() -> None:
    c = running(num_retained=1)
    base, d2 = f("base"), f("d2")
    complete(c, 1, {"win-0": (base,)}, 1000)
    c.handle(Tick(2000))
    c.handle(AcknowledgeCheckpoint(2, "win-0", inc_state("win-0", 2, (base, d2)), now=2000))
    actions = c.handle(DeclineCheckpoint(2, "win-1", "boom", now=2001))
    assert discarded_shared(actions) == ["d2"]
    # a late acknowledgement of 2: its unseen files go, the registered ones stay
    late = c.handle(AcknowledgeCheckpoint(2, "src-0", inc_state("src-0", 2, (base, f("late"))), now=2002))
    assert discarded_shared(late) == ["late"]


def test_a_failed_metadata_write_unregisters_and_frees_only_its_own_files() -> None:
    from yarnflink.checkpoint.coordinator import MetadataWriteFailed

    c = running(num_retained=1)
    base, d2 = f("base"), f("d2")
    complete(c, 1, {"win-0": (base,)}, 1000)
    chains(2, {"win-0": (base, d2)}, c, 2000)
    actions = c.handle(MetadataWriteFailed(2, "disk full", 2001))
    assert discarded_shared(actions) == ["d2"]
    assert set(c.shared.referenced()) == {base.path}


def test_the_registry_is_rebuilt_from_recovered_checkpoints_and_lower_retention_frees_files() -> None:
    """Master failover: the new leader's coordinator takes over the retained checkpoints (here
    three, retained under an older num-retained of 3) and now keeps 1."""
    old = running(num_retained=3)
    base, d2, d3, d4 = f("base"), f("d2"), f("d3"), f("d4")
    complete(old, 1, {"win-0": (base,)}, 1000)
    complete(old, 2, {"win-0": (base, d2)}, 2000)
    complete(old, 3, {"win-0": (f("base3"),)}, 3000)
    new = running(num_retained=1)
    new.handle(CheckpointsRecovered(4, tuple(old.completed)))
    assert set(new.shared.referenced()) == {base.path, d2.path, f("base3").path}
    actions = complete(new, 4, {"win-0": (f("base3"), d3, d4)}, 4000)
    assert discarded_shared(actions) == ["base", "d2"]
    assert [x.checkpoint_id for x in new.completed] == [4]


def test_the_job_ending_discards_every_shared_file_and_a_dropped_latest_deletes_nothing() -> None:
    c = running(num_retained=2)
    base, d2 = f("base"), f("d2")
    complete(c, 1, {"win-0": (base,)}, 1000)
    complete(c, 2, {"win-0": (base, d2)}, 2000)
    assert c.handle(CheckpointUnrestorable(2, "damaged")) != []
    assert set(c.shared.referenced()) == {base.path}  # 2 dropped: d2 let go, but not deleted here
    assert discarded_shared(c.handle(JobTerminated("CANCELED"))) == ["base"]


def test_savepoints_referring_to_shared_files_are_refused() -> None:
    from yarnflink.checkpoint.coordinator import TriggerSavepoint

    c = running()
    c.handle(TriggerSavepoint(1000, "file:///sp"))
    actions: list = []
    for t in ALL:
        actions = c.handle(AcknowledgeCheckpoint(1, t, inc_state(t, 1, (f("x"),)), now=1000))
    abort = next(a for a in actions if isinstance(a, NotifyCheckpointAborted))
    assert "self-contained" in abort.reason


def test_cleanup_deletes_freed_shared_files_only_after_the_pointer_is_removed_and_never_when_deposed() -> None:
    chk = running().completed  # (empty)
    from yarnflink.checkpoint.metadata import CompletedCheckpoint

    c1 = CompletedCheckpoint("job", 1, 0)
    shared = (FileStateHandle("file:///chk/job/shared/x", 10),)
    ha = cu.CheckpointCleanup(ha=True)
    (remove,) = ha.handle(cu.DiscardCompleted(c1, shared))
    assert isinstance(remove, cu.RemovePointer)
    assert ha.handle(cu.HaAnswered(remove.ticket)) == [cu.DeleteCheckpoint(c1, shared)]
    ha.handle(cu.LeadershipLost("revoked"))
    (kept,) = ha.handle(cu.DiscardCompleted(c1, shared))
    assert isinstance(kept, cu.Kept) and chk == []
