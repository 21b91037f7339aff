"""Pyflakes-level lint (undefined names, unused imports, syntax) over the package, tests and benchmarks."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ruff_finds_no_pyflakes_errors() -> None:
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent))
    assert ruff, "ruff is a dev dependency (pip install -e .[dev])"
    out = subprocess.run(
        [ruff, "check", "--select", "F,E9", "--no-cache", "yarnflink", "tests", "examples", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
