"""scripts/bench --suite yarn (issue 17, point 8): its pure parts (when it can run, argument checks,
the summary of the measurements) and its exit without Hadoop; the measurements need a real YARN."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.yarn import METRICS, check_args, sample_line, summarize, unavailable_reason

ROOT = Path(__file__).resolve().parents[3]


def test_without_hadoop_it_says_how_to_run_it(tmp_path: Path) -> None:
    assert unavailable_reason({}) is not None and "HADOOP_HOME=" in (unavailable_reason({}) or "")
    assert "has no bin/hadoop" in (unavailable_reason({"HADOOP_HOME": str(tmp_path)}) or "")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "hadoop").write_text("#!/bin/sh\n")
    assert unavailable_reason({"HADOOP_HOME": str(tmp_path)}) is None
    assert unavailable_reason({"HADOOP_CONF_DIR": "/etc/hadoop/conf", "YARNFLINK_IT_YARN": "1"}) is None
    assert unavailable_reason({"HADOOP_CONF_DIR": "/etc/hadoop/conf"}) is not None  # not opted in


def test_the_suite_exits_2_with_one_line_without_hadoop() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.yarn"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )
    assert done.returncode == 2
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    assert "scripts/bench --suite yarn" in done.stderr


@pytest.mark.parametrize(
    ("runs", "records", "metrics", "message"),
    [
        (0, 40_000, METRICS, "--runs"),
        (3, 10, METRICS, "--records"),
        (3, 40_000, ["container_kill"], "unknown metric"),
        (3, 40_000, [], "no metric"),
    ],
)
def test_bad_arguments_are_named(runs: int, records: int, metrics: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_args(runs, records, metrics)
    check_args(1, 1000, ["per_job_submit_to_result"])


def test_the_summary_gives_median_min_max_per_metric_and_why_one_was_not_measured() -> None:
    summary = summarize(
        {"container_kill_to_all_running": [9.12, 8.0, 11.456], "per_job_submit_to_result": [30.0, 32.0]},
        {"master_kill_to_job_running": "AssertionError: no master process on this node"},
    )
    assert summary == {
        "container_kill_to_all_running": {"runs": 3, "median_s": 9.12, "min_s": 8.0, "max_s": 11.46},
        "master_kill_to_job_running": {"runs": 0, "note": "AssertionError: no master process on this node"},
        "per_job_submit_to_result": {"runs": 2, "median_s": 31.0, "min_s": 30.0, "max_s": 32.0},
    }
    assert list(summary) == [m for m in METRICS if m in summary]  # the documented order
    assert sample_line("per_job_submit_to_result", 2, 31.456) == "per_job_submit_to_result run 2: 31.46 s"
