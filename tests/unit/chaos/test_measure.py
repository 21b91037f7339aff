"""The chaos run's figures (integration/chaos/measure.py): recovery measured from a fault's end
to a checkpoint triggered after it with every task running; duplicates and gaps of an output."""

from __future__ import annotations

from integration.chaos.measure import FaultTiming, Sample, output_diff, recovery, summarize


def s(at: float, job: str, state: str = "RUNNING", running: bool = True, trig: float | None = None) -> Sample:
    return Sample(at, job, state, running, trig)


def test_recovery_waits_for_a_checkpoint_triggered_after_the_fault_ended_in_every_job() -> None:
    fault = FaultTiming(0, "master-kill", began=10.0, ended=12.0)
    samples = [
        s(11.0, "a", "RESTARTING", False, 9.0),
        s(12.5, "a", trig=11.5),  # running, but its checkpoint was triggered before the end
        s(12.5, "b", trig=12.2),
        s(13.0, "a", trig=12.8),  # a recovered; b already had
        s(13.0, "b", trig=12.2),
    ]
    assert recovery(samples, [fault], ["a", "b"]) == {0: (1.0, 3.0)}


def test_a_job_with_a_task_not_running_has_not_recovered_and_a_finished_one_has() -> None:
    fault = FaultTiming(3, "taskexecutor-kill", 0.0, 1.0)
    samples = [s(2.0, "a", running=False, trig=1.5), s(2.0, "b", "FINISHED", False), s(4.0, "a", trig=1.5)]
    assert recovery(samples, [fault], ["a", "b"]) == {3: (3.0, 4.0)}
    assert recovery(samples[:2], [fault], ["a", "b"]) == {3: (None, None)}  # never recovered


def test_a_fault_after_every_job_finished_is_not_measured_and_summaries_count_it() -> None:
    f0, f1 = FaultTiming(0, "s3-outage", 0.0, 1.0), FaultTiming(1, "s3-outage", 5.0, 6.0)
    samples = [s(2.0, "a", trig=1.5), s(3.0, "a", "FINISHED", False)]
    times = recovery(samples, [f0, f1], ["a"])
    assert times == {0: (1.0, 2.0), 1: (None, None)}
    summary = summarize([f0, f1], times)["s3-outage"]
    assert (summary["injected"], summary["measured"], summary["recovery_median_s"]) == (2, 1, 1.0)


def test_duplicates_and_gaps_of_an_output() -> None:
    assert output_diff([1, 2, 2, 3], [1, 2, 3, 4]) == (1, 1)
    assert output_diff([1, 2], [1, 2]) == (0, 0)


def test_orphaned_checkpoints_are_named_by_job_and_id_from_paths_and_keys() -> None:
    from integration.chaos.checker import orphaned_checkpoints

    keys = [
        "checkpoints/j1/chk-21/_metadata",
        "checkpoints/j1/chk-21/op-0",
        "/tmp/x/disk/checkpoints/j2/chk-7/_metadata",
        "checkpoints/j1/shared/a",
    ]
    assert orphaned_checkpoints(keys) == ["j1/chk-21", "j2/chk-7"]
    assert orphaned_checkpoints(["checkpoints/j1/taskowned/x"]) == []
