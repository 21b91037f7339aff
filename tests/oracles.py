"""What exactly-once tests and benchmarks compare: the committed output of a keyed running sum written by the
FileSink as JSON lines, and the output a failure-free run gives."""

from __future__ import annotations

import collections
import glob
import json
import os
from collections.abc import Callable
from pathlib import Path


def running_sums(n: int, key: Callable[[int], int]) -> list[tuple[int, int]]:
    """The sorted ``(key, running sum)`` records of a keyed sum over ``0 .. n-1``, one per input."""
    sums: collections.Counter[int] = collections.Counter()
    out = []
    for x in range(n):
        k = key(x)
        sums[k] += x
        out.append((k, sums[k]))
    return sorted(out)


def committed(path: Path | str) -> list[tuple[int, int]]:
    """The sorted records in the committed ``part-*`` files under ``path`` (in-progress files are hidden)."""
    out: list[tuple[int, int]] = []
    for f in sorted(glob.glob(os.path.join(path, "part-*"))):
        with open(f) as fh:
            out.extend(tuple(json.loads(line)) for line in fh)
    return sorted(out)  # type: ignore[arg-type]
