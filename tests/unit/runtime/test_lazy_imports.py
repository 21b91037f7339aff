"""Deferred imports from several task threads at once (``yarnflink.common.lazy.load_module``):
a TaskExecutor once died with ``_DeadlockError`` when two task threads imported pandas, whose
modules import each other, at the same moment; first imports now run one at a time."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from yarnflink.common.lazy import load_module

#: two slow modules that record when their bodies ran
SLOW = "import time, yf_log\nyf_log.spans.append(('{name}', time.monotonic()))\ntime.sleep(0.3)\nyf_log.spans.append(('{name}', time.monotonic()))\n"


@pytest.fixture
def slow_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "yf_log.py").write_text("spans = []\n")
    for name in ("yf_slow_a", "yf_slow_b"):
        (tmp_path / f"{name}.py").write_text(SLOW.format(name=name))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("yf_log", "yf_slow_a", "yf_slow_b"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    import importlib

    return importlib.import_module("yf_log")


def _load_both_at_once(load: Any) -> None:
    start = threading.Barrier(2)

    def run(name: str) -> None:
        start.wait()
        load(name)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("yf_slow_a", "yf_slow_b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)


def _overlap(spans: list[tuple[str, float]]) -> bool:
    (a0, a1), (b0, b1) = ([t for n, t in spans if n == name] for name in ("yf_slow_a", "yf_slow_b"))
    return a0 < b1 and b0 < a1


def test_plain_imports_from_two_threads_run_module_bodies_at_the_same_time(slow_modules: Any) -> None:
    """What lets two task threads race through pandas' import cycles: the hazard exists."""
    import importlib

    _load_both_at_once(importlib.import_module)
    assert _overlap(slow_modules.spans)


def test_load_module_runs_first_imports_one_at_a_time(slow_modules: Any) -> None:
    _load_both_at_once(load_module)
    assert len(slow_modules.spans) == 4 and not _overlap(slow_modules.spans)


def test_a_loaded_module_is_returned_without_importing_again() -> None:
    assert load_module("json") is sys.modules["json"]
