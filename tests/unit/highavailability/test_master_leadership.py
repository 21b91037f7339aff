"""The master's leadership decisions (yarnflink.dispatcher.recovery): events in, actions out."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from yarnflink.dispatcher.recovery import (
    AcceptJobs,
    CleanupJob,
    Closing,
    FenceResourceManager,
    Granted,
    JobEnded,
    MasterLeadership,
    ReadRecoveryPlan,
    RecoverJob,
    RecoveryFailed,
    RecoveryRead,
    Revoked,
    StepDown,
    SuspendJobs,
)
from yarnflink.highavailability.stores import JobResult, RecoveryPlan, plan_recovery

A, B, C = "a" * 32, "b" * 32, "c" * 32


def test_a_grant_fences_the_resource_manager_then_reads_the_plan() -> None:
    m = MasterLeadership()
    assert m.handle(Granted("s1")) == [FenceResourceManager("s1"), ReadRecoveryPlan("s1")]
    assert m.leading and not m.accepting


def test_recovery_cleans_up_recovers_and_only_then_accepts_jobs() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    dirty = JobResult(A, "FINISHED")
    plan = plan_recovery([A, B, C], [dirty], has_result=lambda j: j == C)
    assert plan == RecoveryPlan((B,), (dirty,), (C,))
    assert m.handle(RecoveryRead("s1", plan)) == [
        CleanupJob(A, "s1"),  # ended under an earlier leader: finish its cleanup
        CleanupJob(C, "s1"),  # has a result: never run again, its graph goes
        RecoverJob(B, "s1"),
        AcceptJobs("s1"),
    ]
    assert m.accepting
    assert m.handle(RecoveryRead("s1", plan)) == []  # once per grant


def test_a_plan_of_an_older_grant_is_ignored() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    assert m.handle(RecoveryRead("s0", RecoveryPlan((A,), ()))) == []
    assert not m.accepting


def test_a_job_that_ends_for_good_is_recorded_and_cleaned_up_once() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    m.handle(RecoveryRead("s1", RecoveryPlan((), ())))
    assert m.handle(JobEnded(A, "FAILED", 1200, "boom")) == [CleanupJob(A, "s1", JobResult(A, "FAILED", 1200, "boom"))]
    assert m.handle(JobEnded(A, "FAILED")) == []


@pytest.mark.parametrize("status", ["SUSPENDED", "RUNNING", "CANCELLING"])
def test_a_job_that_did_not_end_for_good_keeps_its_ha_data(status: str) -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    assert m.handle(JobEnded(A, status)) == []


def test_a_job_ending_while_not_leading_changes_nothing() -> None:
    assert MasterLeadership().handle(JobEnded(A, "FINISHED")) == []


def test_losing_leadership_fences_suspends_and_steps_down_once() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    m.handle(RecoveryRead("s1", RecoveryPlan((), ())))
    assert m.handle(Revoked("ZooKeeper session LOST")) == [
        FenceResourceManager(""),
        SuspendJobs(),
        StepDown("ZooKeeper session LOST"),
    ]
    assert not m.leading and not m.accepting and m.stepped_down
    assert m.handle(Revoked("again")) == []
    # a process leads at most once: a later grant is left to the fresh process replacing it
    assert m.handle(Granted("s2")) == []
    assert m.handle(JobEnded(A, "FINISHED")) == []


def test_a_revocation_without_a_grant_changes_nothing() -> None:
    assert MasterLeadership().handle(Revoked("latch released")) == []


def test_a_failed_recovery_steps_down_but_a_stale_failure_does_not() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    assert m.handle(RecoveryFailed("s0", "old")) == []
    actions = m.handle(RecoveryFailed("s1", "ZooKeeper unreachable"))
    assert actions[:2] == [FenceResourceManager(""), SuspendJobs()]
    assert isinstance(actions[2], StepDown) and "ZooKeeper unreachable" in actions[2].reason


def test_a_second_grant_while_leading_steps_down() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    actions = m.handle(Granted("s2"))
    assert actions[-1] == StepDown("granted a new leader session while leading")
    assert not m.leading


def test_while_closing_a_revocation_only_fences() -> None:
    m = MasterLeadership()
    m.handle(Granted("s1"))
    assert m.handle(Closing()) == []
    assert m.handle(Revoked("the leader election was closed")) == [FenceResourceManager("")]
    assert not m.stepped_down
    assert m.handle(Granted("s2")) == []


def test_an_empty_session_id_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        MasterLeadership().handle(Granted(""))


def test_the_leadership_decisions_import_no_io_library() -> None:
    code = textwrap.dedent("""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in ('grpc', 'kazoo', 'skein', 'fsspec', 'pyspark'):
                    raise ImportError('forbidden import in the pure core: ' + name)
        sys.meta_path.insert(0, Block())
        import yarnflink.dispatcher.recovery
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
