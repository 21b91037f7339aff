"""PyFlink's published DataStream examples, fetched from the apache-flink distribution on PyPI.

The suite runs them unchanged; they are not committed. ``examples_dir()`` downloads the pinned
wheel once (``pip download``, checked against its sha256), extracts ``pyflink/examples/datastream``
into a cache directory and returns it; a failed download raises ``ExamplesUnavailable`` with what
to do (the suite fails then: it never skips). ``scripts/setup`` fetches them ahead of the tests:

    python tests/pyflink_compat/pyflink_examples.py     # prints the directory
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "2.3.0"
#: the wheel pip picks for these flags, whatever Python runs the download (the examples are the same in all)
WHEEL = "apache_flink-2.3.0-cp311-cp311-manylinux_2_5_x86_64.manylinux1_x86_64.manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
SHA256 = "0e5f612704de1610b153e919c0564b62ad513cddfcf4960f5a021658cdf41a13"
PIP_FLAGS = ["--no-deps", "--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux2014_x86_64"]
PREFIX = "pyflink/examples/datastream/"
CACHE_ENV = "YARNFLINK_PYFLINK_EXAMPLES_DIR"


class ExamplesUnavailable(RuntimeError):
    pass


def cache_dir() -> Path:
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "yarnflink" / f"pyflink-examples-{VERSION}"


def examples_dir() -> Path:
    """The extracted ``datastream`` examples directory (downloaded on first use)."""
    target = cache_dir()
    done = target / ".complete"
    if done.is_file() and done.read_text().strip() == SHA256:
        return target / "datastream"
    with tempfile.TemporaryDirectory(prefix="pyflink-examples-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", f"apache-flink=={VERSION}", *PIP_FLAGS, "-d", tmp, "-q"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ExamplesUnavailable(f"could not run {' '.join(cmd)}: {e}") from None
        wheel = Path(tmp) / WHEEL
        if r.returncode != 0 or not wheel.is_file():
            raise ExamplesUnavailable(
                f"downloading apache-flink {VERSION} from PyPI failed ({' '.join(cmd)}):\n{r.stderr[-2000:]}\n"
                f"The PyFlink compatibility suite needs PyFlink's examples: run it where PyPI is reachable, "
                f"or extract pyflink/examples/datastream of {WHEEL} into {target}/datastream and write "
                f"{SHA256} into {done}."
            )
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != SHA256:
            raise ExamplesUnavailable(f"{WHEEL} has sha256 {digest}, expected {SHA256}")
        if target.exists():
            shutil.rmtree(target)
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith(PREFIX) and name.endswith(".py"):
                    out = target / "datastream" / name[len(PREFIX) :]
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_bytes(z.read(name))
    done.write_text(SHA256)
    return target / "datastream"


if __name__ == "__main__":
    try:
        print(examples_dir())
    except ExamplesUnavailable as e:
        print(f"pyflink_examples: {e}", file=sys.stderr)
        sys.exit(1)
