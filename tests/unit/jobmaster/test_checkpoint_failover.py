"""Checkpoint failures beyond ``execution.checkpointing.tolerable-failed-checkpoints`` fail the
job over through the restart strategy (Flink's CheckpointFailureManager calls the JobMaster's
global failover), they do not end it: a real JobMaster whose TaskExecutor never acknowledges, so
every checkpoint expires."""

from __future__ import annotations

from pathlib import Path

from tests.fakes.conditions import wait_until
from tests.unit.jobmaster.harness import StartJobMaster, running_with_one_slot
from yarnflink.executiongraph.executiongraph import ExecutionState, JobStatus

THRESHOLD = "Exceeded checkpoint tolerable failure threshold (0)"


def _expiring(tmp_path: Path, **restart: str) -> dict[str, str]:
    return {
        "execution.checkpointing.interval": "50 ms",
        "execution.checkpointing.timeout": "100 ms",
        "execution.checkpointing.dir": f"file://{tmp_path}",
        **restart,
    }


def test_an_expired_checkpoint_fails_the_job_over_and_the_restart_strategy_restarts_it(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    config = _expiring(
        tmp_path,
        **{
            "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": "1000",
            "restart-strategy.fixed-delay.delay": "0 ms",
        },
    )
    h, te = running_with_one_slot(start_jobmaster, config=config)
    h.reports_cancellations(te)

    wait_until(lambda: len(h.deployed(te)) >= 4, what="both tasks deployed again after the failover")

    assert h.jm.num_restarts >= 1
    assert h.jm.eg.status == JobStatus.RUNNING
    assert not h.terminated.is_set()
    first = h.jm.eg.failures[0]
    assert THRESHOLD in first.message and "CHECKPOINT_EXPIRED" in first.message, first
    assert sorted(first.restarted_tasks) == ["sink (1/1)", "src (1/1)"]  # a global failover: every task
    assert {s.tdd.attempt_number for s in h.deployed(te)[2:4]} == {1}


def test_with_no_restarts_left_the_checkpoint_failure_fails_the_job(
    start_jobmaster: StartJobMaster, tmp_path: Path
) -> None:
    h, te = running_with_one_slot(start_jobmaster, config=_expiring(tmp_path, **{"restart-strategy.type": "none"}))
    h.reports_cancellations(te)

    assert h.terminated.wait(10)
    assert h.jm.eg.status == JobStatus.FAILED and h.jm.num_restarts == 0
    assert THRESHOLD in h.failures() and "CHECKPOINT_EXPIRED" in h.failures()
    assert len(h.deployed(te)) == 2 and all(
        e.state in (ExecutionState.CANCELED, ExecutionState.FAILED) for e in h.jm.eg.executions()
    )
