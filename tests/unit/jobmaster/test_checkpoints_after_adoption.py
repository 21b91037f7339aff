"""Checkpoints continue when a new leader adopts running tasks (issue 18, item 3), through the real
JobMaster and checkpoint driver: embedded HA services (ZooKeeper played in memory, fenced writes),
checkpoint storage on local disk, testing gateways as TaskExecutors that report their tasks.

The earlier leader completed checkpoint 5 (its pointer is in the HA store, its ``_metadata`` on
disk) and had drawn id 6 (in flight at the crash, its directory left behind): the new leader
notifies 5 to every adopted task, aborts 6 and deletes ``chk-6``, restores nothing, and its first
checkpoint is 7."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.conditions import wait_until
from tests.unit.jobmaster.harness import StartJobMaster
from tests.unit.jobmaster.test_jobmaster_reconciliation import NEW, report, two_pipelines
from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.checkpoint.storage import FsCheckpointStorage
from yarnflink.highavailability import EmbeddedHaServices
from yarnflink.highavailability.checkpoints import JobCheckpointRecovery

JOB = "f" * 32
ADOPTED = ("src0-old", "sink0-old", "src1-old", "sink1-old")


@pytest.fixture
def ha() -> Iterator[EmbeddedHaServices]:
    services = EmbeddedHaServices()
    yield services
    services.close()


def _earlier_leader(ha: EmbeddedHaServices, tmp_path: Path) -> None:
    """What the crashed leader left: checkpoint 5 complete, id 6 drawn, chk-6 half written."""
    fence = ha.grant_leadership()
    storage = FsCheckpointStorage(f"file://{tmp_path}", JOB)
    pointer = storage.write_metadata(CompletedCheckpoint(JOB, 5, 1000, {}), None)
    recovery = JobCheckpointRecovery(
        ha.checkpoint_id_counter(JOB, fence), ha.completed_checkpoint_pointer_store(JOB, 1, fence)
    )
    for _ in range(6):
        recovery.reserve_checkpoint_id()
    recovery.add_pointer(5, f"{pointer}/_metadata")
    (tmp_path / JOB / "chk-6").mkdir(parents=True)
    (tmp_path / JOB / "chk-6" / "state-of-a-task").write_bytes(b"x")


def test_a_new_leader_notifies_the_latest_checkpoint_aborts_the_one_in_flight_and_continues_the_ids(
    start_jobmaster: StartJobMaster, ha: EmbeddedHaServices, tmp_path: Path
) -> None:
    _earlier_leader(ha, tmp_path)
    fence = ha.grant_leadership()  # the new leader
    recovery = JobCheckpointRecovery(
        ha.checkpoint_id_counter(JOB, fence), ha.completed_checkpoint_pointer_store(JOB, 1, fence)
    )
    h = start_jobmaster(
        job_graph=two_pipelines(),
        jobmaster_id=NEW,
        reconcile=True,
        checkpoint_ha=recovery,
        config={
            "execution.checkpointing.interval": "60 s",  # only the takeover's own first checkpoint
            "execution.checkpointing.dir": f"file://{tmp_path}",
            "restart-strategy.type": "fixed-delay",
        },
    )
    tes = [h.add_task_executor("te-0"), h.add_task_executor("te-1")]
    h.call(lambda: h.jm.reconnect_task_manager(report("te-0", 0)))
    h.call(lambda: h.jm.reconnect_task_manager(report("te-1", 1)))
    wait_until(lambda: h.jm.reconciled is not None, what="reconciled")

    def sent(method: str) -> list[tuple[str, int]]:
        return sorted((r.execution_id, r.checkpoint_id) for te in tes for r in te.requests(method))

    wait_until(lambda: len(sent("notify_checkpoint_complete")) == 4, what="checkpoint 5 notified")
    assert sent("notify_checkpoint_complete") == sorted((x, 5) for x in ADOPTED)
    wait_until(lambda: len(sent("notify_checkpoint_aborted")) == 4, what="checkpoint 6 aborted")
    assert sent("notify_checkpoint_aborted") == sorted((x, 6) for x in ADOPTED)
    wait_until(lambda: not (tmp_path / JOB / "chk-6").exists(), what="chk-6 deleted")
    assert (tmp_path / JOB / "chk-5" / "_metadata").exists()  # the completed one stays
    # the first checkpoint under the new leader at once, with the next id, to the adopted sources
    wait_until(lambda: len(sent("trigger_checkpoint")) == 2, what="checkpoint 7 triggered")
    assert sent("trigger_checkpoint") == [("src0-old", 7), ("src1-old", 7)]
    stats = h.jm.checkpoint_stats()
    assert stats is not None and stats["latest"]["restored"] is None  # adopted: nothing restored
    assert h.jm.num_restarts == 0
    # a savepoint trigger id of the earlier leader: a failed result naming the takeover, not unknown
    status = h.jm.checkpoints.savepoint_status("a-trigger-of-the-old-leader")  # type: ignore[union-attr]
    assert status is not None and "unknown to this leader" in status["operation"]["failure-cause"]["stack-trace"]
