"""The PyFlink compatibility suite (issue 19, point 5): PyFlink's published DataStream examples
and programs in the style of PyFlink's documentation run unchanged under yarnflink, and their
output equals what real PyFlink printed (expected/, made by generate_expected.py; see README.md).

Most run through ``yarnflink run -m URL`` on one shared local session (in this process, as the CLI
does, to keep the suite fast); ``STANDALONE`` ones run as a user starts them, in a process of
their own: ``python job.py`` (an embedded local cluster whose TaskExecutors' prints reach the
console); test_console.py runs ``yarnflink run job.py`` on a per-job local cluster.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.pyflink_compat.cases import ALL, EXPECTED, PROGRAMS, Case, normalize
from tests.pyflink_compat.conftest import Session, run_process, yarnflink_cmd

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

#: Cases that do not pass under yarnflink yet, and why. They are not run (nor counted) unless
#: YARNFLINK_COMPAT_PENDING=1; a case leaves this list once it passes.
PENDING: dict[str, str] = {}

#: (how, case): run in a process of their own, as a user starts them (``yarnflink run`` on a
#: per-job cluster: test_console.py)
STANDALONE = [("python", "console_print")]

WITH_PENDING = os.environ.get("YARNFLINK_COMPAT_PENDING", "") == "1"
SUITE = [c for c in ALL.values() if WITH_PENDING or c.name not in PENDING]


def _check(case: Case, code: int, stdout: str, stderr: str, out: Path) -> None:
    assert code == 0, f"{case.name} failed (exit {code}):\n{stderr[-4000:]}"
    got = normalize(case, stdout, out)
    want = case.expected_file.read_text().splitlines()
    assert got == want, f"{case.name}: output differs from PyFlink's ({case.expected_file.name})"


@pytest.mark.parametrize("case", SUITE, ids=lambda c: c.name)
def test_program_on_a_session(case: Case, session: Session, pyflink_examples: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    r = session.run(case.program_path(pyflink_examples), case.argv(out), tmp_path)
    _check(case, r.code, r.stdout, r.stderr, out)


@pytest.mark.parametrize(
    "how,name",
    [s for s in STANDALONE if WITH_PENDING or s[1] not in PENDING],
    ids=lambda v: v.replace(" ", "-"),
)
def test_program_standalone(
    how: str, name: str, cli_env: dict[str, str], pyflink_examples: Path, tmp_path: Path
) -> None:
    case = ALL[name]
    out = tmp_path / "out"
    program = str(case.program_path(pyflink_examples))
    cmd = [sys.executable, program] if how == "python" else yarnflink_cmd("run", program)
    r = run_process([*cmd, *case.argv(out)], cli_env, tmp_path)
    _check(case, r.code, r.stdout, r.stderr, out)


def test_every_program_has_a_case_and_an_expected_output() -> None:
    programs = {p.name for p in PROGRAMS.glob("*.py")}
    assert programs == {c.program for c in ALL.values() if not c.program.startswith("example:")}
    assert {p.stem for p in EXPECTED.glob("*.txt")} == set(ALL)
    assert len([c for c in ALL.values() if not c.program.startswith("example:")]) >= 20
    assert set(PENDING) <= set(ALL) and {n for _, n in STANDALONE} <= set(ALL)
