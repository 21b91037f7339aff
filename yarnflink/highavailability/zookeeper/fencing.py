"""Fenced writes: one ZooKeeper transaction whose first operation checks the writer's latch node.

A grant's latch node exists exactly as long as that grant can be valid: it is ephemeral (gone
with the session), never led again once leadership ended by suspension (the driver replaces it),
and deleted when the process leaves the election. ZooKeeper applies a transaction atomically, so a
write that checks the node cannot land after the node is gone, and once it is gone another process
may lead: a deposed leader can never overwrite what the new leader wrote.
"""

from __future__ import annotations

from collections.abc import Callable

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import BadVersionError, NoNodeError, RolledBackError

from yarnflink.highavailability.errors import LeadershipLostError
from yarnflink.highavailability.leaderelection import LeaderFence

__all__ = ["TransactionConflict", "fenced_commit"]


class TransactionConflict(Exception):
    """An operation after the fence check failed (a concurrent change): retry."""

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def fenced_commit(
    client: KazooClient, fence: LeaderFence | None, build: Callable[[TransactionRequest], None]
) -> list[object]:
    """Commits ``build``'s operations, preceded by a check of ``fence``'s latch node (unless
    ``fence`` is None). Raises ``LeadershipLostError`` if the check failed, ``TransactionConflict``
    if another operation did; ZooKeeper connection errors propagate."""
    tx = client.transaction()
    if fence is not None:
        tx.check(fence.latch_path, -1)  # -1: any version; the node's existence is the check
    build(tx)
    results = list(tx.commit())
    if fence is not None and isinstance(results[0], (NoNodeError, BadVersionError)):
        raise LeadershipLostError(
            f"leader session {fence.session_id} is over: its latch node {fence.latch_path} is gone"
        )
    for r in results:
        if isinstance(r, Exception) and not isinstance(r, RolledBackError):
            raise TransactionConflict(r)
    return results
