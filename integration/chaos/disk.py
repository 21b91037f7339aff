"""The checkpoint disk of a chaos run and its faults: full, read-only, slow.

Where the run may mount file systems (root, ``mount`` present), the disk is a small tmpfs: full
means a ballast file takes every free byte (the kernel's ENOSPC on the next write), read-only a
``remount,ro`` (EROFS). The kernel refuses ``remount,ro`` while a file is open for writing (EBUSY):
the injector retries for a few seconds, then makes the disk read-only through the fault file
system instead, and says so. Elsewhere both go through the fault file system (``faultfs``), as
slow I/O always does: the checkpoint URL is ``chaosfile://`` on top of either."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from integration.chaos.faultfs import PROTOCOL, FaultControl

__all__ = ["CheckpointDisk"]

SIZE_MB = 256


def _run(*cmd: str) -> tuple[int, str]:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    return r.returncode, (r.stderr or r.stdout).strip()


class CheckpointDisk:
    def __init__(self, root: Path, control: FaultControl, mode: str = "auto") -> None:
        if mode not in ("auto", "tmpfs", "wrapper"):
            raise ValueError(f"disk mode must be auto, tmpfs or wrapper, got {mode!r}")
        self.root = root
        self.control = control
        self.mounted = False
        self._readonly_by_wrapper = False
        root.mkdir(parents=True, exist_ok=True)
        if mode != "wrapper" and os.geteuid() == 0:
            code, err = _run("mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m,mode=0700", "tmpfs", str(root))
            self.mounted = code == 0
            if not self.mounted and mode == "tmpfs":
                raise RuntimeError(f"cannot mount a tmpfs at {root}: {err}")
        elif mode == "tmpfs":
            raise RuntimeError("a tmpfs checkpoint disk needs root (or use --disk wrapper)")
        (root / "checkpoints").mkdir(exist_ok=True)

    @property
    def url(self) -> str:
        return f"{PROTOCOL}://{self.root / 'checkpoints'}"

    @property
    def ballast(self) -> Path:
        return self.root / ".ballast"

    def describe(self) -> str:
        return f"tmpfs of {SIZE_MB} MB at {self.root}" if self.mounted else f"fault file system on {self.root}"

    def full(self) -> str:
        if not self.mounted:
            self.control.set(full=True)
            return "checkpoint disk full (ENOSPC, fault file system)"
        st = os.statvfs(self.root)
        free = st.f_bavail * st.f_frsize
        fd = os.open(self.ballast, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            if free > 0:
                os.posix_fallocate(fd, 0, free)
        except OSError:
            pass  # what fitted is there: the disk is as full as it gets
        finally:
            os.close(fd)
        return f"checkpoint disk full (tmpfs, {free >> 20} MB of ballast)"

    def readonly(self, retry_s: float = 5.0) -> str:
        if self.mounted:
            deadline = time.monotonic() + retry_s
            while True:
                code, err = _run("mount", "-o", "remount,ro", str(self.root))
                if code == 0:
                    return "checkpoint disk read-only (tmpfs remounted ro)"
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        self.control.set(readonly=True)
        self._readonly_by_wrapper = True
        how = f"tmpfs busy ({err}): fault file system" if self.mounted else "fault file system"
        return f"checkpoint disk read-only (EROFS, {how})"

    def slow(self, delay_s: float) -> str:
        self.control.set(delay_s=delay_s)
        return f"checkpoint disk slow ({delay_s:.1f}s per operation)"

    def heal(self) -> str:
        self.control.set()
        if self.mounted:
            _run("mount", "-o", "remount,rw", str(self.root))
            self.ballast.unlink(missing_ok=True)
        return "checkpoint disk healthy"

    def close(self) -> None:
        """Heals and unmounts (lazily if a process still holds a file there)."""
        self.heal()
        if self.mounted:
            code, _ = _run("umount", str(self.root))
            if code != 0:
                _run("umount", "-l", str(self.root))
            self.mounted = False
