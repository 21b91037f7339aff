"""The log files of this process: the file its root logger writes (``master.log``,
``taskexecutor-N.log``) and the file its stdout/stderr go to (``*.out``), if those are regular
files. Only these files are ever served, so a request can name nothing else."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

#: A log read returns at most this many bytes (the end of the file).
DEFAULT_MAX_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class LogFile:
    name: str
    path: Path
    size: int
    mtime_ms: int


def _root_log_path() -> Path | None:
    for h in logging.getLogger().handlers:
        if isinstance(h, logging.FileHandler):
            return Path(h.baseFilename)
    return None


def _stdout_path() -> Path | None:
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        return None
    p = Path(target)
    return p if target.startswith("/") and p.is_file() else None


def log_files() -> list[LogFile]:
    out: list[LogFile] = []
    seen: set[str] = set()
    for p in (_root_log_path(), _stdout_path()):
        if p is None or p.name in seen:
            continue
        try:
            st = p.stat()
        except OSError:
            continue
        seen.add(p.name)
        out.append(LogFile(p.name, p, st.st_size, int(st.st_mtime * 1000)))
    return out


def main_log_name() -> str | None:
    p = _root_log_path()
    return p.name if p is not None else None


def stdout_name() -> str | None:
    p = _stdout_path()
    return p.name if p is not None else None


def read_log(name: str, max_bytes: int = 0) -> tuple[bytes, bool] | None:
    """(content, truncated) of the log file called ``name``, or None if this process has none."""
    max_bytes = max_bytes if max_bytes > 0 else DEFAULT_MAX_BYTES
    for f in log_files():
        if f.name == name:
            try:
                with open(f.path, "rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    start = max(0, size - max_bytes)
                    fh.seek(start)
                    return fh.read(max_bytes), start > 0
            except OSError:
                return None
    return None
