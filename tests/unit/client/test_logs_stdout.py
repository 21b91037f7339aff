"""``yarnflink logs --stdout``: where user functions print, every TaskExecutor's stdout."""

from __future__ import annotations

import io
from argparse import Namespace
from pathlib import Path

from yarnflink.client.logs import joined, run_logs


def _args(workdir: Path, **kw: object) -> Namespace:
    base: dict[str, object] = {"taskexecutor": None, "stdout": True, "lines": None, "list": False, "session": None}
    base.update(kw)
    return Namespace(workdir=workdir, **base)


def test_stdout_without_a_taskexecutor_shows_every_taskexecutors_prints(tmp_path: Path) -> None:
    (tmp_path / "master.out").write_text("")
    (tmp_path / "master.log").write_text("INFO master started\n")
    (tmp_path / "taskexecutor-0-aa.out").write_text("in map 1\nin map 3\n")
    (tmp_path / "taskexecutor-0-aa.log").write_text("INFO TaskExecutor\n")
    (tmp_path / "taskexecutor-1-bb.out").write_text("in map 2\n")
    out = io.StringIO()
    run_logs(_args(tmp_path), None, out)
    assert out.getvalue() == ("==> taskexecutor-0-aa <==\nin map 1\nin map 3\n==> taskexecutor-1-bb <==\nin map 2\n")
    out = io.StringIO()
    run_logs(_args(tmp_path, taskexecutor="1"), None, out)  # one TaskExecutor: as before
    assert out.getvalue() == "in map 2\n"


def test_joined_shows_a_single_source_without_a_header_and_tails_each() -> None:
    assert joined([("master", ""), ("taskexecutor-0", "a\nb\n")], None) == "a\nb\n"
    assert joined([("a", "1\n2\n"), ("b", "3")], 1) == "==> a <==\n2\n==> b <==\n3\n"
