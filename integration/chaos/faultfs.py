"""A fault-injecting local file system for the checkpoint disk: ``chaosfile:///path`` is the local
``/path`` through fsspec, except that a control file (``YARNFLINK_CHAOS_FS_CONTROL``, JSON written
by the chaos injector) can make it full (writes and new directories fail with ENOSPC), read-only
(every change fails with EROFS) or slow (every open, rename, delete and mkdir waits ``delay_s``).

The cluster's processes know the protocol through ``integration/chaos/site/sitecustomize.py`` on
their PYTHONPATH. Slow I/O always comes from here; full and read-only only where the run cannot
mount a tmpfs for the disk (``disk.py``), with the errors the kernel gives (``OSError`` with the
same errno)."""

from __future__ import annotations

import errno
import json
import os
import time
from typing import Any

from fsspec.implementations.local import LocalFileSystem

__all__ = ["CONTROL_ENV", "PROTOCOL", "ChaosFileSystem", "FaultControl"]

PROTOCOL = "chaosfile"
CONTROL_ENV = "YARNFLINK_CHAOS_FS_CONTROL"


class FaultControl:
    """The injector's side: writes the control file atomically (a reader sees the old or the new)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.set()

    def set(self, *, full: bool = False, readonly: bool = False, delay_s: float = 0.0) -> None:
        if delay_s < 0:
            raise ValueError(f"delay must not be negative, got {delay_s}")
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"full": full, "readonly": readonly, "delay_s": delay_s}, f)
        os.replace(tmp, self.path)


class _State:
    """The file system's side: the control file, read again when it changes."""

    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.value: dict[str, Any] = {}

    def read(self) -> dict[str, Any]:
        path = os.environ.get(CONTROL_ENV)
        if not path:
            return {}
        try:
            st = os.stat(path)
        except OSError:
            return {}
        key = (st.st_mtime_ns, st.st_ino)
        if key != self.key:
            try:
                with open(path) as f:
                    self.value = dict(json.load(f))
                self.key = key
            except (OSError, ValueError):
                return self.value
        return self.value


_STATE = _State()


class ChaosFileSystem(LocalFileSystem):  # type: ignore[misc]
    protocol = (PROTOCOL,)
    root_marker = "/"

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, str) and path.startswith(f"{PROTOCOL}://"):
            path = path[len(PROTOCOL) + 3 :] or "/"
        return super()._strip_protocol(path)

    def unstrip_protocol(self, name: str) -> str:
        return f"{PROTOCOL}://{self._strip_protocol(name)}"

    # ------------------------------------------------------------------ the faults
    def _fault(self, path: Any, *, creates: bool, changes: bool = True) -> None:
        state = _STATE.read()
        delay = float(state.get("delay_s") or 0)
        if delay > 0:
            time.sleep(delay)
        if changes and state.get("readonly"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        if creates and state.get("full"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    def _open(self, path: Any, mode: str = "rb", block_size: Any = None, **kwargs: Any) -> Any:
        writes = any(c in mode for c in "wax+")
        self._fault(path, creates=writes, changes=writes)
        return super()._open(path, mode=mode, block_size=block_size, **kwargs)

    def makedirs(self, path: Any, exist_ok: bool = False) -> None:
        if not (exist_ok and os.path.isdir(self._strip_protocol(path))):
            self._fault(path, creates=True)
        super().makedirs(path, exist_ok=exist_ok)

    def mkdir(self, path: Any, create_parents: bool = True, **kwargs: Any) -> None:
        self._fault(path, creates=True)
        super().mkdir(path, create_parents=create_parents, **kwargs)

    def mv(self, path1: Any, path2: Any, recursive: bool = False, **kwargs: Any) -> None:
        self._fault(path2, creates=False)
        super().mv(path1, path2, recursive=recursive, **kwargs)

    def rm_file(self, path: Any) -> None:
        self._fault(path, creates=False)
        super().rm_file(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Any = None) -> None:
        self._fault(path, creates=False)
        super().rm(path, recursive=recursive, maxdepth=maxdepth)

    def cp_file(self, path1: Any, path2: Any, **kwargs: Any) -> None:
        self._fault(path2, creates=True)
        super().cp_file(path1, path2, **kwargs)

    def touch(self, path: Any, truncate: bool = True, **kwargs: Any) -> None:
        self._fault(path, creates=True)
        super().touch(path, truncate=truncate, **kwargs)
