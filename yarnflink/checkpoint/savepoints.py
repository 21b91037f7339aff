"""The savepoints of a job by trigger id, as pure logic: what ``GET /jobs/:id/savepoints/:triggerid``
answers (Flink's asynchronous operation results) and the stop-with-savepoint outcomes
(``StopWithSavepointTerminationHandler``).

The ``CheckpointCoordinator`` owns one and is the only caller of its methods: it knows which
checkpoint a trigger became and how that checkpoint ended. A trigger goes through:

* ``requested``: a plain savepoint, stop-with-savepoint (``stop``, ``drain``) or
  cancel-with-savepoint; a stop gets its termination handler, whose result is reported once the
  job terminated;
* ``refused(reason)``: it could not be triggered (no target directory, checkpointing off, another
  stop in progress, tasks not running...): a failed result naming why;
* ``triggered(checkpoint_id)``: IN_PROGRESS until that checkpoint is ``aborted`` (a failed result;
  a failed stop leaves the job running) or ``completed`` (the savepoint's location; for a stop,
  the result waits for the job's end);
* ``task_failed``, ``task_ended``, ``job_terminated``: the stop's outcome
  (see ``yarnflink.checkpoint.stop_with_savepoint``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from yarnflink.checkpoint.stop_with_savepoint import (
    IN_PROGRESS,
    FailWithoutRestart,
    StopWithSavepointTerminationHandler,
    completed_operation,
    failed_operation,
    savepoint_type,
)
from yarnflink.checkpoint.takeover import unknown_trigger_reason

#: why a savepoint without a target directory is refused
NO_TARGET_DIRECTORY = (
    "no target directory: pass one (yarnflink savepoint JOBID DIR, yarnflink stop -p DIR JOBID) "
    "or set execution.checkpointing.savepoint-dir"
)


def savepoint_directory(target_directory: str, job_id: str, trigger_id: str) -> str:
    """Where a savepoint is written: its own directory under the target (Flink's
    ``savepoint-<job id prefix>-<random>``)."""
    return f"{target_directory.rstrip('/')}/savepoint-{job_id[:6]}-{trigger_id[:12]}"


@dataclass
class SavepointTracker:
    job_id: str
    #: trigger id -> the operation result (IN_PROGRESS, the location, or the failure)
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    _trigger_of: dict[int, str] = field(default_factory=dict)  # checkpoint id -> trigger id
    _stops: dict[str, StopWithSavepointTerminationHandler] = field(default_factory=dict)
    #: the job was taken over from an earlier leader (the counter's value then), 0: not
    _taken_over_at: int = 0

    def status(self, trigger_id: str) -> dict[str, Any] | None:
        """The result of ``trigger_id``; None: unknown. After a takeover an unknown trigger id
        gets a failed result naming the takeover (it may have been the earlier leader's)."""
        result = self.results.get(trigger_id)
        if result is None and self._taken_over_at:
            return failed_operation(unknown_trigger_reason(trigger_id, self.job_id, self._taken_over_at))
        return dict(result) if result is not None else None

    def taken_over(self, handed_out_below: int) -> None:
        """This leader took the job over; earlier leaders handed out checkpoint ids below
        ``handed_out_below``."""
        self._taken_over_at = max(1, handed_out_below)

    def trigger_of(self, checkpoint_id: int) -> str | None:
        return self._trigger_of.get(checkpoint_id)

    def requested(self, trigger_id: str, stop: bool, drain: bool, cancel_job: bool) -> None:
        """A new trigger; ValueError for a combination Flink refuses (drain without stop, a stop
        that also cancels)."""
        savepoint_type(stop, drain)  # ValueError: drain without stop
        if stop and cancel_job:
            raise ValueError("a savepoint either stops or cancels the job, not both")
        if stop:
            self._stops[trigger_id] = StopWithSavepointTerminationHandler(self.job_id, drain)

    def refused(self, trigger_id: str, reason: str) -> None:
        self._failed(trigger_id, reason)

    def triggered(self, trigger_id: str, checkpoint_id: int) -> None:
        self.results[trigger_id] = dict(IN_PROGRESS)
        self._trigger_of[checkpoint_id] = trigger_id

    def aborted(self, checkpoint_id: int, reason: str) -> None:
        trigger_id = self._trigger_of.pop(checkpoint_id, None)
        if trigger_id is not None:
            self._failed(trigger_id, reason)

    def completed(self, checkpoint_id: int, location: str) -> None:
        trigger_id = self._trigger_of.pop(checkpoint_id, None)
        if trigger_id is None:
            return
        stop = self._stops.get(trigger_id)
        if stop is None:
            self.results[trigger_id] = completed_operation(location)
            return
        stop.savepoint_completed(location)  # the result waits for the job's end (FINISHED)
        self.results[trigger_id] = stop.operation()

    def task_failed(self, task: str, cause: str) -> FailWithoutRestart | None:
        """A task failed: ``FailWithoutRestart`` if a stop's savepoint completed, else None."""
        decision: FailWithoutRestart | None = None
        for trigger_id, stop in self._stops.items():
            verdict = stop.task_failed(task, cause)
            if verdict is not None:
                self.results[trigger_id] = stop.operation()
                decision = decision or verdict
        return decision

    def task_ended(self, task: str, state: str) -> None:
        """A task ended FAILED or CANCELED: after a stop's savepoint completed, the stop failed."""
        for trigger_id, stop in self._stops.items():
            if not stop.done and stop.savepoint_path is not None:
                stop.task_ended(task, state)
                self.results[trigger_id] = stop.operation()

    def job_terminated(self, status: str) -> None:
        for trigger_id, stop in self._stops.items():
            if not stop.done:
                stop.job_terminated(status)
                self.results[trigger_id] = stop.operation()

    def _failed(self, trigger_id: str, reason: str) -> None:
        stop = self._stops.get(trigger_id)
        if stop is None:
            self.results[trigger_id] = failed_operation(reason)
            return
        stop.savepoint_failed(reason)
        self.results[trigger_id] = stop.operation()
