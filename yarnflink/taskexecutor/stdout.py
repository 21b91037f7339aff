"""The TaskExecutor's stdout: what user functions ``print()`` reaches whoever reads the process's
``.out`` file (``yarnflink logs --stdout``, and the console of an attached ``yarnflink run`` on a
per-job cluster, which follows the file: ``yarnflink.client.console``) as soon as a line ends.

Python buffers a file's stdout in blocks, and ``print(x)`` writes ``x`` and the newline in two
calls, so two task threads printing at once could interleave within a line. ``LineStdout`` keeps
each thread's unfinished line apart and writes whole lines, one at a time, right away. Lines are
written as they are: like PyFlink, ``print()`` in a user function carries no subtask prefix (only
the print sink, ``ds.print()``, prefixes ``N> ``).
"""

from __future__ import annotations

import io
import sys
import threading
from typing import TextIO


class LineStdout(io.TextIOBase):
    """A text stream that writes each thread's complete lines to ``target`` and flushes them."""

    def __init__(self, target: TextIO) -> None:
        super().__init__()
        self._target = target
        self._lock = threading.Lock()
        self._pending = threading.local()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._target, "encoding", "utf-8")

    @property
    def buffer(self) -> object:
        """The binary stream below (code writing bytes to ``sys.stdout.buffer`` still works)."""
        return self._target.buffer

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._target.fileno()

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        text = getattr(self._pending, "text", "") + s
        cut = text.rfind("\n") + 1
        self._pending.text = text[cut:]
        if cut:
            with self._lock:
                self._target.write(text[:cut])
                self._target.flush()
        return len(s)

    def flush(self) -> None:
        """Writes this thread's unfinished line too (``print(..., flush=True)``, ``end=""``)."""
        text = getattr(self._pending, "text", "")
        self._pending.text = ""
        with self._lock:
            if text:
                self._target.write(text)
            self._target.flush()


def install_line_stdout() -> None:
    """Makes this process's ``sys.stdout`` a ``LineStdout`` over the current one (once)."""
    if not isinstance(sys.stdout, LineStdout):
        sys.stdout = LineStdout(sys.stdout)
