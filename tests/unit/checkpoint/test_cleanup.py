"""CheckpointCleanup: no checkpoint file goes that a pointer in the HA store may still name."""

from __future__ import annotations

from yarnflink.checkpoint.cleanup import (
    CheckLeadership,
    CheckpointCleanup,
    DeleteCheckpoint,
    DeleteDirectory,
    DeleteState,
    DiscardCompleted,
    DiscardDirectory,
    DiscardFiles,
    HaAnswered,
    JobEnded,
    Kept,
    LeadershipLost,
    PublishFailed,
    RemovePointer,
    orphaned_on_recovery,
)
from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.state.handles import FileStateHandle

CHK3 = CompletedCheckpoint("job", 3, 1000, {})
HANDLES = (FileStateHandle("file:///chk/job/chk-5/a.arrow", 10),)


def test_without_ha_everything_is_deleted_at_once() -> None:
    c = CheckpointCleanup(ha=False)
    assert c.handle(DiscardCompleted(CHK3)) == [DeleteCheckpoint(CHK3)]
    assert c.handle(DiscardFiles(5, HANDLES)) == [DeleteState(5, HANDLES)]
    assert c.handle(DiscardDirectory(5)) == [DeleteDirectory(5)]


def test_with_ha_a_completed_checkpoint_goes_only_after_its_pointer_was_removed() -> None:
    c = CheckpointCleanup(ha=True)
    assert c.handle(DiscardCompleted(CHK3)) == [RemovePointer(1, 3)]
    assert c.handle(HaAnswered(1)) == [DeleteCheckpoint(CHK3)]
    assert c.handle(HaAnswered(1)) == []  # answered already


def test_with_ha_other_files_go_only_after_a_fenced_check() -> None:
    c = CheckpointCleanup(ha=True)
    assert c.handle(DiscardFiles(5, HANDLES)) == [CheckLeadership(1)]
    assert c.handle(DiscardDirectory(5)) == [CheckLeadership(2)]
    assert c.handle(HaAnswered(2)) == [DeleteDirectory(5)]
    assert c.handle(HaAnswered(1)) == [DeleteState(5, HANDLES)]


def test_a_refused_pointer_removal_keeps_the_files_and_deposes_the_job_master() -> None:
    c = CheckpointCleanup(ha=True)
    c.handle(DiscardCompleted(CHK3))
    c.handle(DiscardDirectory(5))
    (kept,) = c.handle(HaAnswered(1, "LeadershipLostError: leader session s1 is over", leadership_lost=True))
    assert isinstance(kept, Kept) and kept.checkpoint_id == 3 and "no longer leads" in kept.reason
    # the check that was on its way succeeded before the refusal: the files stay all the same
    (kept,) = c.handle(HaAnswered(2))
    assert isinstance(kept, Kept) and kept.checkpoint_id == 5
    # and from now on nothing is even asked
    assert [type(a) for a in c.handle(DiscardCompleted(CHK3))] == [Kept]
    assert [type(a) for a in c.handle(DiscardFiles(5, HANDLES))] == [Kept]


def test_another_ha_error_keeps_only_that_checkpoints_files() -> None:
    c = CheckpointCleanup(ha=True)
    c.handle(DiscardCompleted(CHK3))
    (kept,) = c.handle(HaAnswered(1, "ConnectionLoss"))
    assert isinstance(kept, Kept) and "did not confirm" in kept.reason
    assert c.deposed is None
    assert c.handle(DiscardDirectory(5)) == [CheckLeadership(2)]


def test_a_deposed_job_master_deletes_nothing_even_without_ha() -> None:
    """Suspended (leadership revoked), a draw of an id refused, the job SUSPENDED: whatever the
    coordinator discards afterwards stays."""
    for ha in (True, False):
        c = CheckpointCleanup(ha=ha)
        assert c.handle(LeadershipLost("leadership revoked")) == []
        for event in (DiscardCompleted(CHK3), DiscardFiles(5, HANDLES), DiscardDirectory(5)):
            (kept,) = c.handle(event)  # type: ignore[arg-type]
            assert isinstance(kept, Kept) and "leadership revoked" in kept.reason


def test_a_refused_pointer_write_deposes_and_an_unknown_outcome_keeps_that_checkpoint() -> None:
    c = CheckpointCleanup(ha=True)
    assert c.handle(PublishFailed(7, "ConnectionLoss", leadership_lost=False)) == []
    (kept,) = c.handle(DiscardDirectory(7))  # its pointer may have been written
    assert isinstance(kept, Kept) and "may be in the HA store" in kept.reason
    (kept,) = c.handle(DiscardFiles(7, HANDLES))
    assert isinstance(kept, Kept)
    assert c.handle(DiscardDirectory(8)) == [CheckLeadership(1)]  # other checkpoints: as usual
    c.handle(PublishFailed(8, "LeadershipLostError: over", leadership_lost=True))
    assert c.deposed is not None and "refused" in c.deposed
    assert [type(a) for a in c.handle(HaAnswered(1))] == [Kept]


def test_with_ha_a_job_ending_for_good_leaves_its_completed_checkpoints_to_the_ha_cleanup() -> None:
    """They go with the job's HA data once its result is recorded: a leader deposed before that
    leaves them, pointers and files, to the next one."""
    c = CheckpointCleanup(ha=True)
    assert c.handle(JobEnded("FAILED")) == []
    (kept,) = c.handle(DiscardCompleted(CHK3))
    assert isinstance(kept, Kept) and "HA data" in kept.reason
    assert c.handle(DiscardFiles(5, HANDLES)) == [CheckLeadership(1)]  # no pointer names these
    c = CheckpointCleanup(ha=False)
    c.handle(JobEnded("FAILED"))
    assert c.handle(DiscardCompleted(CHK3)) == [DeleteCheckpoint(CHK3)]
    c = CheckpointCleanup(ha=True)
    c.handle(JobEnded("SUSPENDED"))
    assert c.deposed == "the job is SUSPENDED"


def test_a_recovering_leader_deletes_only_directories_no_pointer_can_name() -> None:
    """Below the counter's value at recovery every id was handed out to an earlier leader, whose
    pointer writes are fenced off now: a directory without a pointer there never gets one."""
    directories = [1, 2, 4, 5, 7, 9]
    assert orphaned_on_recovery(directories, retained=[4, 7], handed_out_below=9) == [1, 2, 5]
    assert orphaned_on_recovery(directories, retained=[], handed_out_below=1) == []


def test_a_pointer_write_the_store_refused_wrote_nothing() -> None:
    """E.g. the job's HA data is gone (the job ended while its last _metadata was written): the
    files of that checkpoint may go as any aborted checkpoint's."""
    c = CheckpointCleanup(ha=True)
    c.handle(PublishFailed(9, "HaStoreError: the HA data of job ... is gone", leadership_lost=False, refused=True))
    assert c.deposed is None and 9 not in c.maybe_published
    assert c.handle(DiscardDirectory(9)) == [CheckLeadership(1)]
