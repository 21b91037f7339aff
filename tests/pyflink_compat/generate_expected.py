"""Writes expected/<case>.txt by running each program with real PyFlink (see README.md).

Run it with a Python that has apache-flink installed and its bin directory first on PATH (PyFlink
starts its Python workers as ``python``):

    PATH=/tmp/pyflink-venv/bin:$PATH python tests/pyflink_compat/generate_expected.py [CASE...]

Each program runs as ``python program.py args`` would, except that the root logger gets a
NullHandler first, so a program's ``logging.basicConfig(stream=sys.stdout, ...)`` adds no log
lines to its output (under the suite, pytest's log capture does the same).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import ALL, EXPECTED, normalize  # noqa: E402
from pyflink_examples import examples_dir  # noqa: E402

RUNNER = (
    "import logging, runpy, sys; logging.getLogger().addHandler(logging.NullHandler()); "
    "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
)


def main(names: list[str]) -> int:
    examples = examples_dir()
    EXPECTED.mkdir(exist_ok=True)
    failed = []
    for name in names or list(ALL):
        case = ALL[name]
        with tempfile.TemporaryDirectory(prefix=f"expected-{name}-") as tmp:
            out = Path(tmp) / "out"
            program = case.program_path(examples)
            cmd = [sys.executable, "-c", RUNNER, str(program), *case.argv(out)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp)
            if r.returncode != 0:
                failed.append(name)
                print(f"FAILED {name}:\n{r.stderr[-3000:]}", file=sys.stderr)
                continue
            lines = normalize(case, r.stdout, out)
            case.expected_file.write_text("".join(line + "\n" for line in lines))
            print(f"{name}: {len(lines)} lines", flush=True)
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
