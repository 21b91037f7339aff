"""A task's side of stop-with-savepoint (FLIP-34, ``docs/SAVEPOINTS.md``) around the pure
``StopWithSavepointLatch`` (``yarnflink/checkpoint/barriers.py``).

After the snapshot of a synchronous savepoint the task is suspended: a source emits no record
(its default action is suspended), no processing-time callback runs, and a new checkpoint trigger
waits here. The savepoint's completion notification finishes the task (its outputs end without
MAX_WATERMARK, its operators' input is not ended); its abort resumes the task and the triggers
that waited run.
"""

from __future__ import annotations

import logging

from yarnflink.checkpoint.barriers import (
    AdvanceToEndOfEventTime,
    FinishTask,
    ResumeProcessing,
    StopWithSavepointLatch,
)
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.partitioners import NetworkOutput
from yarnflink.operators.watermarks import MAX_WATERMARK
from yarnflink.taskexecutor.checkpoints import CheckpointTrigger
from yarnflink.taskexecutor.mailbox import MailboxController

log = logging.getLogger(__name__)


class StopWithSavepoint:
    """``on_suspended`` / ``on_resumed`` / ``on_finishing`` tell the task's loop (a source stops
    and starts emitting, and ends once finishing)."""

    def __init__(self, task_name: str) -> None:
        self.task_name = task_name
        self.latch = StopWithSavepointLatch()
        #: the latch's ``processing_suspended``, kept as a plain flag (asked after every batch)
        self.processing_suspended = False
        self._waiting: list[CheckpointTrigger] = []
        self._controller: MailboxController | None = None

    def control(self, controller: MailboxController | None) -> None:
        """A source's loop: suspended with the task, ended when it finishes."""
        self._controller = controller

    @property
    def is_suspended(self) -> bool:
        return self.latch.is_suspended

    @property
    def is_finishing(self) -> bool:
        return self.latch.is_finishing

    def defer(self, trigger: CheckpointTrigger) -> bool:
        """While processing is suspended a trigger waits (taken up again if the savepoint is
        aborted); True if it does."""
        if self.latch.processing_suspended:
            self._waiting.append(trigger)
            return True
        return False

    def advances_to_end_of_event_time(self, trigger: CheckpointTrigger) -> bool:
        actions = self.latch.on_trigger(trigger.checkpoint_id, trigger.synchronous, trigger.drain)
        return any(isinstance(a, AdvanceToEndOfEventTime) for a in actions)

    def on_snapshot_taken(self, checkpoint_id: int, synchronous: bool) -> None:
        self.latch.on_snapshot_taken(checkpoint_id, synchronous)
        self.processing_suspended = self.latch.processing_suspended
        if self.latch.is_suspended and self._controller is not None:
            self._controller.suspend_default_action()

    def on_notification(self, checkpoint_id: int, completed: bool) -> list[CheckpointTrigger]:
        """The triggers to run again (an aborted stop resumes the task)."""
        if completed:
            actions = self.latch.on_checkpoint_complete(checkpoint_id)
        else:
            actions = self.latch.on_checkpoint_aborted(checkpoint_id)
        self.processing_suspended = self.latch.processing_suspended
        resumed: list[CheckpointTrigger] = []
        for a in actions:
            if isinstance(a, ResumeProcessing):
                log.info("task %s: stop-with-savepoint %d was aborted; resuming", self.task_name, checkpoint_id)
                if self._controller is not None:
                    self._controller.resume_default_action()
                resumed, self._waiting = self._waiting, []
            elif isinstance(a, FinishTask):
                log.info("task %s: stop-with-savepoint %d completed; finishing", self.task_name, checkpoint_id)
                if self._controller is not None:
                    self._controller.all_actions_completed()
        return resumed


def advance_to_end_of_event_time(chain: OperatorChain) -> None:
    """``--drain``: MAX_WATERMARK into the chain before the savepoint's snapshot, so every
    event-time timer and window fires (here and downstream) before the barrier."""
    if chain.is_source:  # a source has no input: the watermark starts at its output
        emit = getattr(chain.head.output, "emit_watermark", None)
        if emit is not None:
            emit(MAX_WATERMARK)
    else:
        chain.process_watermark(MAX_WATERMARK)


def end_outputs_without_draining(outputs: list[NetworkOutput]) -> None:
    """After a stop's savepoint: flush and end every output partition without MAX_WATERMARK
    (Flink's NO_DRAIN end: the consumers' pending event time stays in the savepoint). With
    ``--drain`` the MAX_WATERMARK went out before the barrier already."""
    for out in outputs:
        out.end_watermark = False
        out.end_input()


__all__ = ["StopWithSavepoint", "advance_to_end_of_event_time", "end_outputs_without_draining"]
