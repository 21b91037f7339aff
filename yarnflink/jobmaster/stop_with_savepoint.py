"""The result of a stop-with-savepoint, as pure logic (Flink's
``StopWithSavepointTerminationHandlerImpl``): events in, the asynchronous operation's result out.

Flink reports a stop-with-savepoint as done only once the job terminated: the savepoint's path
when the savepoint completed AND every task finished (the job is FINISHED), a failure otherwise.

* ``savepoint_failed(reason)`` before the savepoint completed: the stop failed, and the job goes on
  (the tasks resume on the savepoint's abort);
* ``savepoint_completed(path)``: the tasks finish now; the result waits for the job's end;
* ``job_terminated(status)``: FINISHED after the savepoint completed is success; any other end
  (or an end before the savepoint completed) is a failure that names the status (and the
  savepoint, which exists and can be restored, if it completed);
* ``task_ended(task, state)`` after the savepoint completed, with a state other than FINISHED
  (a task failed while finishing): a failure naming the task (Flink: "inconsistent execution
  state after stopping with savepoint"); the job fails over (or is cancelled) instead.

The first outcome is final: later events change nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

#: Flink's SavepointType names: a plain savepoint, stop without and with --drain
SAVEPOINT, SUSPEND, TERMINATE = "SAVEPOINT", "SUSPEND", "TERMINATE"


def savepoint_type(stop: bool, drain: bool) -> str:
    """The SavepointType of a trigger; ``drain`` without ``stop`` is refused (ValueError)."""
    if drain and not stop:
        raise ValueError("drain applies to stop-with-savepoint only")
    if not stop:
        return SAVEPOINT
    return TERMINATE if drain else SUSPEND


def failed_operation(reason: str, exception_class: str = "CheckpointException") -> dict[str, Any]:
    """Flink's asynchronous operation result of a failed savepoint (``GET .../savepoints/:id``)."""
    return {"status": {"id": "COMPLETED"},
            "operation": {"failure-cause": {"class": exception_class, "stack-trace": reason}}}


def completed_operation(location: str) -> dict[str, Any]:
    return {"status": {"id": "COMPLETED"}, "operation": {"location": location}}


IN_PROGRESS: dict[str, Any] = {"status": {"id": "IN_PROGRESS"}}


@dataclass
class StopWithSavepointTerminationHandler:
    """One stop-with-savepoint of a job (``drain``: TERMINATE, else SUSPEND)."""

    job_id: str
    drain: bool = False
    savepoint_path: Optional[str] = None
    _result: Optional[dict[str, Any]] = None

    @property
    def savepoint_type(self) -> str:
        return TERMINATE if self.drain else SUSPEND

    def operation(self) -> dict[str, Any]:
        """The operation result for ``GET /jobs/:id/savepoints/:triggerid``."""
        return dict(self._result) if self._result is not None else dict(IN_PROGRESS)

    @property
    def done(self) -> bool:
        return self._result is not None

    def savepoint_failed(self, reason: str) -> None:
        if self.done or self.savepoint_path is not None:
            return
        self._result = failed_operation(
            f"stop-with-savepoint of job {self.job_id} failed, the job keeps running: {reason}")

    def savepoint_completed(self, path: str) -> None:
        if self.done or self.savepoint_path is not None:
            return
        self.savepoint_path = path

    def task_ended(self, task: str, state: str) -> None:
        if self.done or self.savepoint_path is None or state == "FINISHED":
            return
        self._result = failed_operation(
            f"stop-with-savepoint of job {self.job_id}: the savepoint {self.savepoint_path} completed, but task "
            f"{task} ended {state} instead of FINISHED, so the job did not stop with it",
            exception_class="FlinkException")

    def job_terminated(self, status: str) -> None:
        if self.done:
            return
        if self.savepoint_path is None:
            self._result = failed_operation(
                f"stop-with-savepoint of job {self.job_id} failed: the job ended {status} before the "
                f"savepoint completed")
        elif status == "FINISHED":
            self._result = completed_operation(self.savepoint_path)
        else:
            self._result = failed_operation(
                f"stop-with-savepoint of job {self.job_id}: the savepoint {self.savepoint_path} completed, but "
                f"the job ended {status} instead of FINISHED", exception_class="FlinkException")
