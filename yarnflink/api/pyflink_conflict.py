"""yarnflink's ``pyflink`` namespace and Apache Flink's ``apache-flink`` distribution both install
a top-level ``pyflink`` package. In one environment they overwrite each other's files, so neither
works as it should; this module detects that and says so, naming both (never silently)."""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import os
import sys
from typing import Any

#: environment variable that lets ``import pyflink`` load yarnflink's namespace even though
#: apache-flink is installed (e.g. in a test that checks the message); not for programs
ALLOW_ENV = "YARNFLINK_ALLOW_APACHE_FLINK"


def apache_flink_installed() -> tuple[str, str] | None:
    """(version, location) of the installed apache-flink distribution, or None."""
    try:
        dist = importlib.metadata.distribution("apache-flink")
    except importlib.metadata.PackageNotFoundError:
        return None
    location = str(dist.locate_file(""))
    return dist.version, location


def conflict_message(version: str, location: str) -> str:
    return (
        f"apache-flink {version} (Apache Flink's PyFlink, in {location}) is installed in the same Python "
        f"environment as yarnflink, which provides its own `pyflink` namespace. Both install a top-level "
        f"`pyflink` package into the same directory, so one has overwritten the other's files and `import pyflink` "
        f"would run neither as intended. Use one environment per runtime: for yarnflink, "
        f"`pip uninstall apache-flink` and then `pip install --force-reinstall --no-deps yarnflink` "
        f"(or `pip install -e .` again in a source checkout); for PyFlink, a separate virtualenv."
    )


class ApacheFlinkGuard(importlib.abc.MetaPathFinder):
    """Placed first on ``sys.meta_path`` while ``yarnflink run`` / ``yarnflink info`` run a job
    file: ``import pyflink`` fails with ``conflict_message`` instead of loading apache-flink's
    package (which may have replaced yarnflink's files)."""

    def __init__(self, version: str, location: str):
        self.message = conflict_message(version, location)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname == "pyflink" or fullname.startswith("pyflink."):
            raise ImportError(self.message, name=fullname)
        return None


def install_guard() -> ApacheFlinkGuard | None:
    """Installs the guard if apache-flink is installed (and not allowed); returns it to remove."""
    found = apache_flink_installed()
    if found is None or os.environ.get(ALLOW_ENV):
        return None
    guard = ApacheFlinkGuard(*found)
    sys.meta_path.insert(0, guard)
    return guard


def remove_guard(guard: ApacheFlinkGuard | None) -> None:
    if guard is not None and guard in sys.meta_path:
        sys.meta_path.remove(guard)
