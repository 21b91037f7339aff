"""Savepoint and checkpoint URLs on HDFS keep the namenode's host and port (issue 17):
pyarrow's HadoopFileSystem strips them (``hdfs:///...``), which names another cluster's
filesystem, or none, for whoever restores from the printed path."""

from __future__ import annotations

from typing import Any

import fsspec
from fsspec.implementations.memory import MemoryFileSystem

from yarnflink.checkpoint.storage import _url, filesystem_for


class HostDroppingFileSystem(MemoryFileSystem):
    """Strips ``scheme://host:port`` as pyarrow's HadoopFileSystem does."""

    protocol = ("yfhdfs",)
    root_marker = "/"

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        path = str(path)
        if path.startswith("yfhdfs://"):
            rest = path[len("yfhdfs://") :]
            path = "/" + rest.split("/", 1)[1] if "/" in rest else "/"
        return path


def test_urls_keep_the_namenodes_host_and_port() -> None:
    fsspec.register_implementation("yfhdfs", HostDroppingFileSystem, clobber=True)
    fs, path = filesystem_for("yfhdfs://nn.example:8020/savepoints")
    assert path == "/savepoints" and fs.unstrip_protocol(path) == "yfhdfs:///savepoints"  # what pyarrow does
    assert _url(fs, path + "/savepoint-1") == "yfhdfs://nn.example:8020/savepoints/savepoint-1"


def test_urls_without_an_authority_are_as_fsspec_makes_them(tmp_path: Any) -> None:
    fs, path = filesystem_for(f"file://{tmp_path}")
    assert _url(fs, path) == f"file://{tmp_path}"
    fs, path = filesystem_for("memory://bucket/sp")
    assert _url(fs, path).startswith("memory://") and _url(fs, path).endswith("bucket/sp")
