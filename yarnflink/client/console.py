"""The console of an attached run on a cluster of this machine: what the job's user functions
print in the TaskExecutors appears where the program runs, as with PyFlink.

A local cluster's TaskExecutors write their stdout to ``<workdir>/taskexecutor-*.out`` (whole
lines, at once: ``yarnflink.taskexecutor.stdout``). ``ConsoleForwarder`` follows those files and
copies every complete line to the client's stdout; ``drain()`` copies what is there now, so the
executor calls it once a job has ended and everything the job printed is shown before
``env.execute()`` returns. The files stay, for ``yarnflink logs --stdout``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TextIO

#: How often the forwarder looks for new output while a job runs.
POLL_INTERVAL_S = 0.1


class ConsoleForwarder:
    def __init__(
        self,
        workdir: Path,
        out: TextIO | None = None,
        *,
        pattern: str = "taskexecutor-*.out",
        poll_interval: float = POLL_INTERVAL_S,
    ) -> None:
        self.workdir = workdir
        self.pattern = pattern
        self.poll_interval = poll_interval
        self._out = out
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def out(self) -> TextIO:
        return self._out if self._out is not None else sys.stdout  # as it is now (tests swap it)

    def start(self) -> ConsoleForwarder:
        self._thread = threading.Thread(target=self._follow, name="console-forwarder", daemon=True)
        self._thread.start()
        return self

    def skip_existing(self) -> ConsoleForwarder:
        """Copies nothing written before now (a session's files hold earlier jobs' output)."""
        with self._lock:
            for path in self.workdir.glob(self.pattern):
                try:
                    self._offsets[path] = path.stat().st_size
                except OSError:
                    continue
        return self

    def drain(self) -> None:
        """Copies every complete line written so far."""
        with self._lock:
            self._copy(final=False)

    def stop(self) -> None:
        """Stops following, after copying everything (an unfinished last line too)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        with self._lock:
            self._copy(final=True)

    def __enter__(self) -> ConsoleForwarder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ internals
    def _follow(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self.drain()
            except Exception:  # noqa: BLE001 - a console copy must never end the client
                pass

    def _copy(self, final: bool) -> None:
        chunks: list[bytes] = []
        for path in sorted(self.workdir.glob(self.pattern)):
            offset = self._offsets.get(path, 0)
            try:
                with open(path, "rb") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            if not data and not final:
                continue
            self._offsets[path] = offset + len(data)
            data = self._partial.pop(path, b"") + data
            cut = len(data) if final else data.rfind(b"\n") + 1
            if cut < len(data):
                self._partial[path] = data[cut:]
            if cut:
                chunks.append(data[:cut] if data[:cut].endswith(b"\n") else data[:cut] + b"\n")
        if chunks:
            out = self.out
            out.write(b"".join(chunks).decode("utf-8", errors="replace"))
            out.flush()
