"""Shipping the client's Python environment to the containers (issue 17, point 6).

With neither ``yarn.ship-archives`` nor ``yarn.python.executable`` the nodes would need a Python
with yarnflink; instead the client packs its own environment (conda-pack for a conda environment,
venv-pack for a virtualenv), uploads it once per content hash to ``yarn.environment.dir`` on the
cluster's filesystem and reuses it: the archive becomes the application's first
``yarn.ship-archives`` entry, unpacked in every container, whose ``bin/python`` runs yarnflink.

The content hash covers what decides the environment's behaviour: the interpreter's version and
platform, every installed distribution with its version, and yarnflink's own source files (an
editable install changes without a version change). venv-pack does not include the interpreter:
its nodes need the same base Python at the same path (conda-pack includes it).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import platform
import posixpath
import site
import sys
import tarfile
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from yarnflink.checkpoint.storage import filesystem_for
from yarnflink.common.config import Configuration
from yarnflink.deployment.yarn import YarnDeploymentError
from yarnflink.deployment.yarn.options import YarnConfigOptions

__all__ = ["environment_hash", "pack_environment", "ship_client_environment"]

Packer = Callable[[Path], None]  # writes the packed environment (.tar.gz) to the given path


def environment_hash() -> str:
    """The content hash of this process's environment (see the module docstring)."""
    h = hashlib.sha256()
    h.update(f"{sys.version}|{platform.platform()}|{sys.prefix}".encode())
    # the environment's site-packages only: a library's vendored dist-info that joins sys.path on
    # import (setuptools') would change the hash within one process
    installed = metadata.distributions(path=site.getsitepackages())
    for dist in sorted((d.metadata["Name"] or "", d.version) for d in installed):
        h.update(f"{dist[0]}=={dist[1]}\n".encode())
    package = Path(__file__).resolve().parents[2]
    for path in sorted(package.rglob("*.py")):
        h.update(str(path.relative_to(package)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:32]


def pack_environment(target: Path, prefix: str | None = None) -> None:
    """conda-pack for a conda environment, venv-pack for a virtualenv (this process's unless
    ``prefix`` names another), else a clear error; an archive without yarnflink is refused."""
    prefix = prefix or sys.prefix
    conda = os.environ.get("CONDA_PREFIX")
    if (Path(prefix) / "conda-meta").is_dir() or (conda and Path(conda).resolve() == Path(prefix).resolve()):
        try:
            import conda_pack  # optional: packs the client's conda environment
        except ImportError:
            raise YarnDeploymentError(_HINT.format(tool="conda-pack")) from None
        _run_packer(conda_pack.pack, prefix, target)
    elif (Path(prefix) / "pyvenv.cfg").is_file():
        try:
            import venv_pack  # optional: packs the client's virtualenv
        except ImportError:
            raise YarnDeploymentError(_HINT.format(tool="venv-pack")) from None
        _run_packer(venv_pack.pack, prefix, target)
    else:
        raise YarnDeploymentError(
            f"the client's Python ({prefix}) is no virtualenv or conda environment, which yarnflink could ship: "
            "set yarn.python.executable (a Python with yarnflink on every node) or yarn.ship-archives"
        )
    _check_holds_yarnflink(target, prefix)


def _run_packer(pack: Callable[..., Any], prefix: str, target: Path) -> None:
    try:
        pack(prefix=prefix, output=str(target), force=True)
    except Exception as e:  # noqa: BLE001 - the packers raise their own exception types (e.g. editable installs)
        raise YarnDeploymentError(f"packing the client's environment {prefix} failed: {e}") from e


def _check_holds_yarnflink(archive: Path, prefix: str) -> None:
    """An editable install (pip install -e) leaves yarnflink's source outside the environment: the
    packers ship only a path hook pointing at the client's checkout, and every container would fail
    to import yarnflink. Refused here rather than as dead containers."""
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    if not any(fnmatch.fnmatch(n.lstrip("./"), "lib/python*/site-packages/yarnflink/__init__.py") for n in names):
        raise YarnDeploymentError(
            f"the packed environment {prefix} holds no yarnflink package (an editable install, pip install -e, "
            "is not shipped): install yarnflink into it non-editable, or set yarn.ship-archives / "
            "yarn.python.executable"
        )


_HINT = (
    "shipping the client's environment needs {tool} (pip install {tool}), or set yarn.ship-archives "
    "/ yarn.python.executable"
)


def ship_client_environment(
    config: Configuration,
    default_fs: str | None,
    *,
    packer: Packer = pack_environment,
    content_hash: Callable[[], str] = environment_hash,
    filesystem: Callable[[str], tuple[Any, str]] = filesystem_for,
) -> Configuration:
    """``config`` with the client's environment as its first ship-archive (uploaded if this
    content hash is not there yet); unchanged when archives or an interpreter are configured."""
    if config.get(YarnConfigOptions.SHIP_ARCHIVES) or config.get(YarnConfigOptions.PYTHON_EXECUTABLE):
        return config
    directory = config.get(YarnConfigOptions.ENVIRONMENT_DIR)
    if not directory:
        if not default_fs or default_fs.startswith("file:"):
            raise YarnDeploymentError(
                "no place to upload the client's environment: set yarn.environment.dir, "
                "yarn.ship-archives or yarn.python.executable"
            )
        user = os.environ.get("HADOOP_USER_NAME") or os.environ.get("USER") or "yarnflink"
        directory = f"{default_fs.rstrip('/')}/user/{user}/.yarnflink/environments"
    fs, base = filesystem(str(directory))
    name = f"yarnflink-env-{content_hash()}.tar.gz"
    remote = posixpath.join(base, name)
    url = f"{str(directory).rstrip('/')}/{name}"
    if not fs.exists(remote):
        with tempfile.TemporaryDirectory(prefix="yarnflink-env-") as tmp:
            local = Path(tmp) / name
            packer(local)
            fs.makedirs(base, exist_ok=True)
            partial = remote + ".uploading"
            fs.put_file(str(local), partial)
            fs.mv(partial, remote)  # readers never see half an archive
    shipped = config.copy()
    shipped.set(YarnConfigOptions.SHIP_ARCHIVES, url)
    return shipped
