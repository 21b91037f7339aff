"""Ordered leader session ids (epochs): which of two leaders is the newer one.

A leader session id with ZooKeeper HA is ``<epoch>-<random hex>``, the epoch being the sequence
number of the leader's latch node. ZooKeeper numbers the latch nodes of one election in the
order they are created, and the leader is always the lowest live node: a node below the current
leader's is gone for good (its session ended), so every later leader's node, and epoch, is higher.
A TaskExecutor or a store that has seen epoch N refuses a caller of epoch < N: a deposed leader
that comes back (SIGCONT after its session expired, a healed partition) changes nothing.

Session ids without an epoch (no HA, embedded HA, tests) are not ordered: only equality counts.
"""

from __future__ import annotations

import posixpath
import uuid

__all__ = ["epoch_of", "is_older", "latch_sequence", "session_id_for_latch"]

_WIDTH = 10  # ZooKeeper's sequence suffix is 10 digits


def latch_sequence(latch_path: str) -> int | None:
    """The sequence number of a latch node (``.../<guid>-latch-0000000012`` -> 12), or None."""
    tail = posixpath.basename(latch_path).rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def session_id_for_latch(latch_path: str | None) -> str:
    """A fresh session id carrying the latch's sequence as its epoch (plain hex without one)."""
    seq = latch_sequence(latch_path) if latch_path else None
    fresh = uuid.uuid4().hex
    return fresh if seq is None else f"{seq:0{_WIDTH}d}-{fresh}"


def epoch_of(session_id: str) -> int | None:
    head, sep, rest = session_id.partition("-")
    if not sep or not head.isdigit() or not rest:
        return None
    return int(head)


def is_older(candidate: str, newest: str) -> bool:
    """``candidate`` is a session id of an earlier leader than ``newest`` (both carry epochs)."""
    a, b = epoch_of(candidate), epoch_of(newest)
    return a is not None and b is not None and a < b
