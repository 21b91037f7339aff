"""CheckpointCleanup: when checkpoint files may be deleted, as pure logic (the decisions of Flink's
``CheckpointsCleaner`` with a ``CompletedCheckpointStore`` in ZooKeeper). ``handle(event) ->
list[action]``; the JobMaster's checkpoint driver runs the ZooKeeper calls and deletions.

The rule: **no file goes that a pointer in the HA store may still name.**

* Without HA, what the CheckpointCoordinator discards is deleted at once.
* With HA, a completed checkpoint (subsumed, or the job ended for good) is deleted only once its
  pointer was removed from the HA store by a fenced write (``RemovePointer``); other files (an
  aborted checkpoint's directory, state of a late acknowledgement, a savepoint's staging copies)
  only once a fenced check (``CheckLeadership``) confirmed this JobMaster still leads. The write
  or check failing keeps the files.
* A JobMaster deposed (``LeadershipLost``: a fenced write refused, its leadership revoked, the
  job SUSPENDED) deletes nothing any more, whatever it was asked: the next leader owns the
  checkpoints now and may resume from any of them.
* With HA, a job that ends for good (``JobEnded``) leaves its completed checkpoints to the
  cleanup of its HA data, which runs once its result is in the JobResultStore (Flink's
  ``CheckpointResourcesCleanupRunner``): a leader deposed before that leaves them, pointers and
  files, to the next one, which resumes the job from them. Ending otherwise (SUSPENDED) deposes.
* A checkpoint whose pointer write failed for another reason than a lost leadership
  (``PublishFailed``: ZooKeeper away, an unknown outcome) may be in the store: its files stay
  (Flink's ``PossibleInconsistentStateException``).

Every kept file is reported (``Kept``) so the driver logs why.

``orphaned_on_recovery``: what a recovering leader may delete of what earlier leaders kept (the
``chk-<n>`` directories no pointer names, nor ever can); ``unreferenced_shared``: the shared state
files (incremental checkpoints) no retained checkpoint refers to, nor ever can, for a recovering
leader and for a job that ended for good.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.state.handles import StreamStateHandle


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True)
class DiscardCompleted:
    """The coordinator discards a completed checkpoint (``DiscardCheckpoint``), with the shared
    files no retained checkpoint refers to any more."""

    checkpoint: CompletedCheckpoint
    shared: tuple[StreamStateHandle, ...] = ()


@dataclass(frozen=True)
class DiscardFiles:
    """The coordinator discards state files of a checkpoint that did not complete (``DiscardState``)."""

    checkpoint_id: int
    handles: tuple[StreamStateHandle, ...]


@dataclass(frozen=True)
class DiscardDirectory:
    """The directory ``chk-<checkpoint_id>`` of a checkpoint that did not complete (an aborted
    one, or a savepoint's staging copies) is to go."""

    checkpoint_id: int


@dataclass(frozen=True)
class HaAnswered:
    """The answer to ``RemovePointer`` / ``CheckLeadership`` ``ticket``: ``error`` None: done;
    ``leadership_lost``: the write was refused by the fence."""

    ticket: int
    error: str | None = None
    leadership_lost: bool = False


@dataclass(frozen=True)
class PublishFailed:
    """Adding the pointer of ``checkpoint_id`` to the HA store failed: ``leadership_lost`` (the
    fence refused it), ``refused`` (the store refused it, e.g. the job's HA data is gone: nothing
    was written), else the outcome is unknown (the connection was lost: it may have landed)."""

    checkpoint_id: int
    reason: str
    leadership_lost: bool
    refused: bool = False


@dataclass(frozen=True)
class LeadershipLost:
    reason: str


@dataclass(frozen=True)
class JobEnded:
    status: str  # FINISHED | CANCELED | FAILED (for good) | SUSPENDED


Event = Union[DiscardCompleted, DiscardFiles, DiscardDirectory, HaAnswered, PublishFailed, LeadershipLost, JobEnded]


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class RemovePointer:
    ticket: int
    checkpoint_id: int


@dataclass(frozen=True)
class CheckLeadership:
    ticket: int


@dataclass(frozen=True)
class DeleteCheckpoint:
    """Delete the checkpoint (``_metadata`` first), then the shared files ``shared``."""

    checkpoint: CompletedCheckpoint
    shared: tuple[StreamStateHandle, ...] = ()


@dataclass(frozen=True)
class DeleteState:
    checkpoint_id: int
    handles: tuple[StreamStateHandle, ...]


@dataclass(frozen=True)
class DeleteDirectory:
    checkpoint_id: int


@dataclass(frozen=True)
class Kept:
    """Files of ``checkpoint_id`` not deleted, and why (``expected``: as usual, not a fault)."""

    checkpoint_id: int
    reason: str
    expected: bool = False


Delete = Union[DeleteCheckpoint, DeleteState, DeleteDirectory]
Action = Union[RemovePointer, CheckLeadership, DeleteCheckpoint, DeleteState, DeleteDirectory, Kept]


def orphaned_on_recovery(directories: Iterable[int], retained: Iterable[int], handed_out_below: int) -> list[int]:
    """The ``chk-<n>`` directories of a job that its recovering leader may delete: no pointer in
    the HA store names them (``retained``: the ids it has) and none ever can, as their ids were
    handed out by the shared counter before this leader's grant (below ``handed_out_below``, the
    counter's value before this leader draws an id) and an earlier leader's pointer writes are
    fenced off now. Without this, the files a deposed leader kept (its last checkpoints, whose
    pointers it could no longer add) would leak."""
    named = set(retained)
    return sorted(n for n in set(directories) if n < handed_out_below and n not in named)


_SHARED_NAME = re.compile(r"^chk(\d+)_")


def unreferenced_shared(files: Iterable[str], referenced: Iterable[str], written_below: int) -> list[str]:
    """The shared state files (URLs, named ``chk<n>_...`` by the checkpoint ``n`` that wrote them)
    that may be deleted: no retained checkpoint refers to them (``referenced``, from all of their
    metadata) and none can any more, as the checkpoint that wrote them is decided (``n`` below
    ``written_below``). Two callers: a recovering leader (``written_below``: the shared counter's
    value at its grant; earlier leaders' tasks are gone and their pointer writes fenced off: e.g.
    files a deposed leader freed but could no longer delete) and a job that ended for good (the
    next id it would have drawn; its tasks are gone: e.g. a file a TaskExecutor wrote and was
    killed before its acknowledgement, so no checkpoint ever registered it). A file named
    otherwise is left alone."""
    keep = set(referenced)
    out = []
    for url in files:
        m = _SHARED_NAME.match(url.rsplit("/", 1)[-1])
        if m and int(m.group(1)) < written_below and url not in keep:
            out.append(url)
    return sorted(out)


def _checkpoint_id(d: Delete) -> int:
    return d.checkpoint.checkpoint_id if isinstance(d, DeleteCheckpoint) else d.checkpoint_id


class CheckpointCleanup:
    def __init__(self, ha: bool) -> None:
        self.ha = ha
        #: why this JobMaster deletes nothing any more (None: it may)
        self.deposed: str | None = None
        #: checkpoints whose pointer may be in the HA store though their completion failed
        self.maybe_published: dict[int, str] = {}
        #: HA: the job ended for good; its completed checkpoints go with its HA data
        self.left_to_ha_cleanup = False
        self._waiting: dict[int, Delete] = {}
        self._next_ticket = 1

    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, DiscardCompleted):
            return self._discard(DeleteCheckpoint(event.checkpoint, event.shared), pointer=True)
        if isinstance(event, DiscardFiles):
            return self._discard(DeleteState(event.checkpoint_id, event.handles), pointer=False)
        if isinstance(event, DiscardDirectory):
            return self._discard(DeleteDirectory(event.checkpoint_id), pointer=False)
        if isinstance(event, HaAnswered):
            return self._answered(event)
        if isinstance(event, PublishFailed):
            if event.leadership_lost:
                self._depose(f"adding checkpoint {event.checkpoint_id} to the HA store was refused: {event.reason}")
            elif not event.refused:
                self.maybe_published[event.checkpoint_id] = event.reason
            return []
        if isinstance(event, JobEnded):
            if event.status not in ("FINISHED", "CANCELED", "FAILED"):
                self._depose(f"the job is {event.status}")
            elif self.ha:
                self.left_to_ha_cleanup = True
            return []
        self._depose(event.reason)
        return []

    def _depose(self, reason: str) -> None:
        if self.deposed is None:
            self.deposed = reason

    def _discard(self, delete: Delete, pointer: bool) -> list[Action]:
        cid = _checkpoint_id(delete)
        if self.deposed is not None:
            return [Kept(cid, f"this JobMaster no longer leads ({self.deposed}): the next leader owns its checkpoints")]
        if pointer and self.left_to_ha_cleanup:
            return [Kept(cid, "the job ended: its checkpoints go with its HA data once its result is recorded", True)]
        if cid in self.maybe_published:
            return [Kept(cid, f"its pointer may be in the HA store (adding it failed: {self.maybe_published[cid]})")]
        if not self.ha:
            return [delete]
        ticket = self._next_ticket
        self._next_ticket += 1
        self._waiting[ticket] = delete
        return [RemovePointer(ticket, cid) if pointer else CheckLeadership(ticket)]

    def _answered(self, e: HaAnswered) -> list[Action]:
        delete = self._waiting.pop(e.ticket, None)
        if delete is None:
            return []
        cid = _checkpoint_id(delete)
        if e.error is not None:
            if e.leadership_lost:
                self._depose(e.error)
                return [Kept(cid, f"this JobMaster no longer leads ({e.error})")]
            return [Kept(cid, f"the HA store did not confirm it may go: {e.error}")]
        if self.deposed is not None:  # deposed while the answer was on its way
            return [Kept(cid, f"this JobMaster no longer leads ({self.deposed}): the next leader owns its checkpoints")]
        return [delete]
