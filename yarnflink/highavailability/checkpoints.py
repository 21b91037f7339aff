"""The HA side of one job's checkpoints, as the JobMaster's checkpoint driver sees it (Flink's
``CheckpointRecoveryFactory``: a ``CheckpointIDCounter`` and a ``CompletedCheckpointStore``).

* ``reserve_checkpoint_id(at_least)``: the id the next checkpoint takes, drawn from the shared
  counter, so a new leader never reuses an id an earlier leader may have started.
* ``add_pointer(checkpoint_id, pointer)``: a checkpoint is complete only once its pointer (the URL
  of its ``_metadata``) is in ZooKeeper; a deposed leader's write is refused.
* ``latest()``: what a new leader's JobMaster resumes from; ``retained()``: every pointer kept
  (``execution.checkpointing.num-retained``), oldest first, which the new leader takes over.
* ``remove_pointer(checkpoint_id)`` and ``check_leadership()``: fenced, so that a deposed leader
  deletes no checkpoint file (``yarnflink.checkpoint.cleanup`` decides when files may go).

Every method blocks on ZooKeeper: the driver calls them off its loop.
"""

from __future__ import annotations

from yarnflink.highavailability.stores import CheckpointIDCounter, CompletedCheckpointPointerStore

__all__ = ["JobCheckpointRecovery"]


class JobCheckpointRecovery:
    def __init__(self, counter: CheckpointIDCounter, pointers: CompletedCheckpointPointerStore) -> None:
        self.counter = counter
        self.pointers = pointers
        self._started = False

    def _start(self) -> None:
        if not self._started:
            self.counter.start()
            self._started = True

    def reserve_checkpoint_id(self, at_least: int = 1) -> int:
        self._start()
        cid = self.counter.get_and_increment()
        if cid < at_least:  # the counter is behind what this JobMaster used: move it past
            self.counter.set_count(at_least + 1)
            cid = at_least
        return cid

    def next_id(self) -> int:
        """The id the counter hands out next (every lower one was handed out already)."""
        self._start()
        return self.counter.get()

    def add_pointer(self, checkpoint_id: int, pointer: str) -> list[tuple[int, str]]:
        return self.pointers.add_checkpoint(checkpoint_id, pointer)

    def remove_pointer(self, checkpoint_id: int) -> None:
        """The pointer goes from ZooKeeper (fenced: ``LeadershipLostError`` once deposed, even
        if it is gone already); only then may the checkpoint's files be deleted."""
        self.pointers.remove(checkpoint_id)

    def check_leadership(self) -> None:
        """``LeadershipLostError`` if this JobMaster's leadership is over (a fenced no-op write)."""
        self.pointers.check_leadership()

    def latest(self) -> tuple[int, str] | None:
        return self.pointers.get_latest()

    def retained(self) -> list[tuple[int, str]]:
        return self.pointers.get_all()
