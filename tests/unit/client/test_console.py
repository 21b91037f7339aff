"""ConsoleForwarder: the TaskExecutors' stdout files of a local cluster, copied to the console."""

from __future__ import annotations

import io
from pathlib import Path

from tests.fakes.conditions import wait_until
from yarnflink.client.console import ConsoleForwarder


def _append(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)


def test_drain_copies_every_complete_line_of_every_taskexecutor(tmp_path: Path) -> None:
    out = io.StringIO()
    console = ConsoleForwarder(tmp_path, out)
    _append(tmp_path / "taskexecutor-0-abc.out", "in map 1\nin map 3\n")
    _append(tmp_path / "taskexecutor-1-def.out", "in map 2\npart")
    _append(tmp_path / "master.out", "not a TaskExecutor's\n")
    console.drain()
    assert sorted(out.getvalue().splitlines()) == ["in map 1", "in map 2", "in map 3"]
    _append(tmp_path / "taskexecutor-1-def.out", "ial\n")
    _append(tmp_path / "taskexecutor-2-new.out", "a TaskExecutor started later\n")
    console.drain()
    assert out.getvalue().splitlines()[3:] == ["partial", "a TaskExecutor started later"]
    console.drain()  # nothing new: nothing copied twice
    assert len(out.getvalue().splitlines()) == 5


def test_stop_copies_an_unfinished_last_line(tmp_path: Path) -> None:
    out = io.StringIO()
    console = ConsoleForwarder(tmp_path, out)
    _append(tmp_path / "taskexecutor-0.out", "done\nno newline")
    console.stop()
    assert out.getvalue() == "done\nno newline\n"


def test_started_it_follows_the_files_while_a_job_runs(tmp_path: Path) -> None:
    out = io.StringIO()
    with ConsoleForwarder(tmp_path, out, poll_interval=0.01):
        _append(tmp_path / "taskexecutor-0.out", "while running\n")
        wait_until(lambda: out.getvalue() == "while running\n", timeout=10, what="the line copied")


def test_skip_existing_leaves_out_earlier_output(tmp_path: Path) -> None:
    _append(tmp_path / "taskexecutor-0.out", "an earlier job\n")
    out = io.StringIO()
    console = ConsoleForwarder(tmp_path, out).skip_existing()
    _append(tmp_path / "taskexecutor-0.out", "this job\n")
    console.stop()
    assert out.getvalue() == "this job\n"
