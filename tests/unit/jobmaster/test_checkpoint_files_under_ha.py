"""No code path deletes a checkpoint that a pointer in the HA store still names (issue 22 item 1): a
real JobMaster with embedded HA services (``EmbeddedHaServices``: ZooKeeper played in memory,
fenced writes checked against the current latch) and checkpoint storage on local disk; its
TaskExecutor is a testing gateway whose tasks the test acknowledges.

``lose_latch_unnoticed()`` plays the master frozen while its ZooKeeper session expired: it still
believes it leads, but its fenced writes fail.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import TestingTaskExecutorGateway
from tests.unit.jobmaster.harness import Harness, StartJobMaster, running_with_one_slot
from yarnflink.checkpoint import coordinator as cc
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus
from yarnflink.highavailability import EmbeddedHaServices
from yarnflink.highavailability.checkpoints import JobCheckpointRecovery
from yarnflink.highavailability.stores import CompletedCheckpointPointerStore
from yarnflink.jobmaster.gateway import AcknowledgeCheckpoint, SerializedThrowable
from yarnflink.state.handles import TaskStateSnapshot

JOB = "f" * 32  # the harness's job


@pytest.fixture
def ha() -> Iterator[EmbeddedHaServices]:
    services = EmbeddedHaServices()
    yield services
    services.close()


def _leading(
    start: StartJobMaster,
    ha: EmbeddedHaServices,
    tmp_path: Path,
    pointers: CompletedCheckpointPointerStore | None = None,
    retained: int = 1,
) -> tuple[Harness, TestingTaskExecutorGateway]:
    fence = ha.grant_leadership()
    recovery = JobCheckpointRecovery(
        ha.checkpoint_id_counter(JOB, fence), pointers or ha.completed_checkpoint_pointer_store(JOB, retained, fence)
    )
    config = {
        "execution.checkpointing.interval": "50 ms",
        "execution.checkpointing.dir": f"file://{tmp_path}",
        "execution.checkpointing.num-retained": str(retained),
        "restart-strategy.type": "none",
    }
    h, te = running_with_one_slot(start, config=config, checkpoint_ha=recovery, jobmaster_id=fence.session_id)
    h.reports_cancellations(te)
    return h, te


def _acknowledge(h: Harness, te: TestingTaskExecutorGateway, checkpoint_id: int) -> None:
    wait_until(
        lambda: checkpoint_id in {t.checkpoint_id for t in te.requests("trigger_checkpoint")},
        what=f"checkpoint {checkpoint_id} triggered",
    )
    for submit in h.deployed(te):
        ack = AcknowledgeCheckpoint(h.token, submit.tdd.execution_id, checkpoint_id, 0, TaskStateSnapshot())
        h.call(lambda: h.jm.acknowledge_checkpoint(ack))


def _metadata(tmp_path: Path, checkpoint_id: int) -> Path:
    return tmp_path / JOB / f"chk-{checkpoint_id}" / "_metadata"


def _pointers(ha: EmbeddedHaServices) -> list[int]:
    return [cid for cid, _ in ha.completed_checkpoint_pointer_store(JOB).get_all()]


def _complete(h: Harness, te: TestingTaskExecutorGateway, ha: EmbeddedHaServices, checkpoint_id: int) -> None:
    _acknowledge(h, te, checkpoint_id)
    wait_until(lambda: checkpoint_id in _pointers(ha), what=f"checkpoint {checkpoint_id} in the HA store")


def _fail_the_job(h: Harness, te: TestingTaskExecutorGateway) -> None:
    h.update(h.execution_id(te, "src"), ExecutionState.FAILED, SerializedThrowable("ValueError", "bad record"))
    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.FAILED


def test_a_leading_job_master_deletes_a_subsumed_checkpoint_after_its_pointer(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    h, te = _leading(start_jobmaster, ha, tmp_path)
    _complete(h, te, ha, 1)
    _complete(h, te, ha, 2)
    wait_until(lambda: not _metadata(tmp_path, 1).parent.exists(), what="checkpoint 1 deleted once subsumed")
    assert _pointers(ha) == [2] and _metadata(tmp_path, 2).exists()


def test_a_job_ending_for_good_leaves_its_checkpoints_to_the_cleanup_of_its_ha_data(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    """The issue's case: a leader frozen past its session fails its job before it notices. Its
    JobMaster deletes nothing at the job's end: the checkpoints go with the job's HA data once its
    result is recorded (dispatcher/leadership.py), which a deposed leader never gets to."""
    h, te = _leading(start_jobmaster, ha, tmp_path)
    _complete(h, te, ha, 1)
    ha.lose_latch_unnoticed()

    _fail_the_job(h, te)  # FAILED, NO_EXTERNALIZED_CHECKPOINTS: the coordinator discards checkpoint 1

    driver = h.jm.checkpoints
    assert driver is not None and driver.cleanup.left_to_ha_cleanup
    wait_until(lambda: not h.jm._io, what="the JobMaster's I/O done")
    assert _pointers(ha) == [1] and _metadata(tmp_path, 1).exists()  # the next leader resumes from it


def test_an_aborted_checkpoint_of_a_deposed_job_master_keeps_its_directory(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    h, te = _leading(start_jobmaster, ha, tmp_path)
    _complete(h, te, ha, 1)
    wait_until(lambda: te.count("trigger_checkpoint") >= 2, what="checkpoint 2 triggered (its id drawn)")
    ha.lose_latch_unnoticed()

    _acknowledge(h, te, 2)  # _metadata written, the pointer refused: checkpoint 2 is aborted

    driver = h.jm.checkpoints
    assert driver is not None
    wait_until(lambda: driver.cleanup.deposed is not None, what="the pointer write refused")
    wait_until(lambda: 2 in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")}, what="2 aborted")
    assert _metadata(tmp_path, 2).exists() and _metadata(tmp_path, 1).exists() and _pointers(ha) == [1]


def test_a_suspended_job_master_deletes_nothing(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    h, te = _leading(start_jobmaster, ha, tmp_path)
    _complete(h, te, ha, 1)
    ha.revoke_leadership()
    h.call(lambda: h.jm.suspend("leadership revoked", timeout=0.1))
    driver = h.jm.checkpoints
    assert driver is not None
    (checkpoint,) = driver.coordinator.completed

    def discard() -> None:
        driver._apply([cc.DiscardCheckpoint(checkpoint), cc.DiscardIncomplete(1)])

    h.jm.loop.call_soon_threadsafe(discard)
    wait_until(lambda: driver.cleanup.deposed is not None, what="the suspension noted")
    assert _metadata(tmp_path, 1).exists() and _pointers(ha) == [1]


class _UnknownOutcome(CompletedCheckpointPointerStore):
    """Writes the pointer, then loses the connection before the answer: the writer cannot know."""

    def __init__(self, store: CompletedCheckpointPointerStore) -> None:
        self.store = store
        self.max_retained = store.max_retained

    def add_checkpoint(self, checkpoint_id: int, pointer: str) -> list[tuple[int, str]]:
        self.store.add_checkpoint(checkpoint_id, pointer)
        raise ConnectionError("the ZooKeeper connection was lost before the answer")

    def get_all(self) -> list[tuple[int, str]]:
        return self.store.get_all()

    def remove(self, checkpoint_id: int) -> None:
        self.store.remove(checkpoint_id)

    def shutdown(self, job_status: str) -> list[tuple[int, str]]:
        return self.store.shutdown(job_status)


def test_a_checkpoint_whose_pointer_write_had_an_unknown_outcome_keeps_its_files(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    pointers = _UnknownOutcome(ha.completed_checkpoint_pointer_store(JOB, 1, None))
    h, te = _leading(start_jobmaster, ha, tmp_path, pointers)

    _acknowledge(h, te, 1)

    wait_until(lambda: 1 in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")}, what="1 aborted")
    driver = h.jm.checkpoints
    assert driver is not None
    wait_until(lambda: 1 in driver.cleanup.maybe_published, what="the unknown outcome noted")
    assert _pointers(ha) == [1] and _metadata(tmp_path, 1).exists()  # the pointer landed: its files stay
    assert driver.cleanup.deposed is None


def _new_leader_after(h: Harness, ha: EmbeddedHaServices) -> None:
    """The old leader is deposed (its JobMaster suspended); the test grants the next one."""
    ha.revoke_leadership()
    h.call(lambda: h.jm.suspend("leadership revoked", timeout=0.1))


def test_a_recovering_leader_falls_back_from_a_deleted_newest_checkpoint_and_says_so(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    old, te = _leading(start_jobmaster, ha, tmp_path, retained=2)
    _complete(old, te, ha, 1)
    _complete(old, te, ha, 2)
    _new_leader_after(old, ha)
    shutil.rmtree(_metadata(tmp_path, 2).parent)  # its pointer stays in the HA store

    h, te = _leading(start_jobmaster, ha, tmp_path, retained=2)

    assert {s.tdd.restored_checkpoint_id for s in h.deployed(te)} == {1}
    (note,) = [f for f in h.jm.eg.failures if "skipped on recovery" in f.message]
    assert note.message.startswith(f"checkpoint 2 (file://{_metadata(tmp_path, 2)}) skipped on recovery: ")
    assert "does not exist" in note.message and "checkpoint 1 restored instead" in note.message
    assert h.jm.eg.status == JobStatus.RUNNING and h.jm.num_restarts == 0
    driver = h.jm.checkpoints
    assert driver is not None
    assert [c.checkpoint_id for c in driver.coordinator.completed] == [1]
    assert driver.coordinator.next_checkpoint_id >= 3  # 2 is never used again
    assert "checkpoint 2" in str(driver.stats()["latest"]["restored"]["skipped"])


def test_a_recovering_leader_that_finds_no_restorable_checkpoint_fails_the_job_naming_them(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    old, te = _leading(start_jobmaster, ha, tmp_path, retained=2)
    _complete(old, te, ha, 1)
    _complete(old, te, ha, 2)
    _new_leader_after(old, ha)
    shutil.rmtree(_metadata(tmp_path, 2).parent)
    _metadata(tmp_path, 1).write_bytes(b"not a checkpoint")

    fence = ha.grant_leadership()
    recovery = JobCheckpointRecovery(
        ha.checkpoint_id_counter(JOB, fence), ha.completed_checkpoint_pointer_store(JOB, 2, fence)
    )
    h = start_jobmaster(
        config={"execution.checkpointing.interval": "50 ms", "execution.checkpointing.dir": f"file://{tmp_path}"},
        checkpoint_ha=recovery,
        jobmaster_id=fence.session_id,
    )

    assert h.terminated.wait(10) and h.jm.eg.status == JobStatus.FAILED
    message = h.failures()
    assert "none of the 2 checkpoint(s) whose pointers are in the HA store can be restored" in message
    assert "checkpoint 2 (" in message and "checkpoint 1 (" in message


def test_a_recovering_leader_deletes_what_a_deposed_one_kept_that_no_pointer_names(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    """Chaos finding 3: the deposed leader's last checkpoint (its pointer refused) would leak."""
    old, te = _leading(start_jobmaster, ha, tmp_path)
    _complete(old, te, ha, 1)
    wait_until(lambda: te.count("trigger_checkpoint") >= 2, what="checkpoint 2 triggered (its id drawn)")
    ha.lose_latch_unnoticed()
    _acknowledge(old, te, 2)  # _metadata written, the pointer refused: kept
    wait_until(lambda: 2 in {n.checkpoint_id for n in te.requests("notify_checkpoint_aborted")}, what="2 aborted")
    assert _metadata(tmp_path, 2).exists()
    ha.lose_session()  # now it notices
    old.call(lambda: old.jm.suspend("leadership lost", timeout=0.1))
    ha.reconnect()

    h, te = _leading(start_jobmaster, ha, tmp_path)

    wait_until(lambda: not _metadata(tmp_path, 2).parent.exists(), what="chk-2 deleted by the new leader")
    assert _metadata(tmp_path, 1).exists() and _pointers(ha) == [1]  # what it resumed from stays
    assert {s.tdd.restored_checkpoint_id for s in h.deployed(te)} == {1}
