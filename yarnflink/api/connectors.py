"""File connectors: ``FileSource`` for ``env.from_source`` and ``FileSink`` for ``ds.sink_to``."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from yarnflink.operators.specs import DiscardingSinkSpec, FileSinkSpec, FileSourceSpec

SOURCE_FORMATS = ("parquet", "csv", "jsonl")
SINK_FORMATS = ("jsonl", "parquet", "csv")
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def _check_path(path: Any, what: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str) or not path.strip():
        raise TypeError(f"{what} path must be a non-empty string (a path or fsspec URL), got {path!r}")
    return path


def _check_format(fmt: Any, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(fmt, str) or fmt.lower() not in allowed:
        raise ValueError(f"unknown {what} format {fmt!r}: expected one of {', '.join(allowed)}")
    return fmt.lower()


def _check_storage_options(opts: Any, what: str) -> dict[str, Any]:
    if opts is None:
        return {}
    if not isinstance(opts, dict):
        raise TypeError(f"{what} storage_options must be a dict, got {type(opts).__name__}")
    return dict(opts)


@dataclass
class FileSource:
    """Reads a file or every file below a directory (sorted); ``path`` is an fsspec URL.

    ``format`` is ``"parquet"``, ``"csv"`` or ``"jsonl"``; if omitted it is taken from the file
    extension (``.parquet``, ``.csv``, ``.jsonl``/``.ndjson``). Records are dicts (one per row)."""

    path: str
    format: str | None = None
    storage_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = _check_path(self.path, "FileSource")
        if self.format is None:
            ext = os.path.splitext(self.path.rstrip("/"))[1].lower()
            if ext not in _EXTENSIONS:
                raise ValueError(
                    f"FileSource({self.path!r}): cannot infer the format from the path; pass "
                    f"format= one of {', '.join(SOURCE_FORMATS)}"
                )
            self.format = _EXTENSIONS[ext]
        self.format = _check_format(self.format, SOURCE_FORMATS, "FileSource")
        self.storage_options = _check_storage_options(self.storage_options, "FileSource")

    def to_spec(self) -> Any:
        return FileSourceSpec(path=self.path, format=self.format, storage_options=dict(self.storage_options))  # type: ignore[arg-type]


@dataclass
class FileSink:
    """Writes one file per subtask, ``<path>/part-<subtask>-0.<ext>``; ``format`` is ``"jsonl"``,
    ``"parquet"`` or ``"csv"``."""

    path: str
    format: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = _check_path(self.path, "FileSink")
        self.format = _check_format(self.format, SINK_FORMATS, "FileSink")
        self.storage_options = _check_storage_options(self.storage_options, "FileSink")

    def to_spec(self) -> Any:
        return FileSinkSpec(path=self.path, format=self.format, storage_options=dict(self.storage_options))  # type: ignore[arg-type]


@dataclass
class DiscardingSink:
    """Drops every record (Flink's DiscardingSink), e.g. for benchmarks."""

    def to_spec(self) -> Any:
        return DiscardingSinkSpec()
