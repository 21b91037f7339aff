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
* ``task_failed(task, cause)``: a task failed. Before the savepoint completed nothing is decided
  here (None): the savepoint is aborted (``savepoint_failed``) and the job fails over as usual.
  After it completed but before the job FINISHED (say, a sink failing while it commits on the
  savepoint's completion) the decision is ``FailWithoutRestart`` (Flink since 1.15, FLINK-26783):
  the job ends FAILED, with no failover -- a restart would restore the latest *checkpoint*, older
  than the savepoint, and a sink could commit that interval twice -- and the result is a failure
  that names the savepoint, says it is complete and consistent but its side effects may not have
  been committed, and tells how to commit them: start the job from it (``run -s``);
* ``task_ended(task, state)`` after the savepoint completed, with a state other than FINISHED
  (e.g. a task cancelled while finishing): a failure naming the task (Flink: "inconsistent
  execution state after stopping with savepoint").

The first outcome is final: later events change nothing (``task_failed`` after the savepoint
completed decides ``FailWithoutRestart`` every time, whatever the result says).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    return {
        "status": {"id": "COMPLETED"},
        "operation": {"failure-cause": {"class": exception_class, "stack-trace": reason}},
    }


def completed_operation(location: str) -> dict[str, Any]:
    return {"status": {"id": "COMPLETED"}, "operation": {"location": location}}


IN_PROGRESS: dict[str, Any] = {"status": {"id": "IN_PROGRESS"}}

#: the failure of a job whose task failed after its stop's savepoint completed (Flink's class name)
STOPPING_EXCEPTION = "StopWithSavepointStoppingException"


@dataclass(frozen=True)
class FailWithoutRestart:
    """The decision: the job ends FAILED with this cause; no failover, no restart."""

    exception_class: str
    message: str


def stopping_failure_message(job_id: str, savepoint_path: str, task: str, cause: str) -> str:
    """Why a job stopped with a savepoint ended FAILED, and what to do (FLINK-26783's message)."""
    return (
        f"stop-with-savepoint of job {job_id}: the savepoint {savepoint_path} completed, but task {task} "
        f"failed before the job finished ({cause}). The savepoint is complete and consistent, but its side "
        f"effects (e.g. the files the FileSink commits when it completes) may not have been committed. The "
        f"job ends FAILED and is not restarted; to commit them, start the job from the savepoint: "
        f"yarnflink run -s {savepoint_path} <job file>"
    )


@dataclass
class StopWithSavepointTerminationHandler:
    """One stop-with-savepoint of a job (``drain``: TERMINATE, else SUSPEND)."""

    job_id: str
    drain: bool = False
    savepoint_path: str | None = None
    _result: dict[str, Any] | None = None

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
            f"stop-with-savepoint of job {self.job_id} failed, the job keeps running: {reason}"
        )

    def savepoint_completed(self, path: str) -> None:
        if self.done or self.savepoint_path is not None:
            return
        self.savepoint_path = path

    def task_failed(self, task: str, cause: str) -> FailWithoutRestart | None:
        """Task ``task`` failed with ``cause`` (one line): None before the savepoint completed
        (the job fails over as usual), else ``FailWithoutRestart`` (see the module's doc)."""
        if self.savepoint_path is None:
            return None
        message = stopping_failure_message(self.job_id, self.savepoint_path, task, cause)
        if not self.done:
            self._result = failed_operation(message, exception_class=STOPPING_EXCEPTION)
        return FailWithoutRestart(STOPPING_EXCEPTION, message)

    def task_ended(self, task: str, state: str) -> None:
        if self.done or self.savepoint_path is None or state == "FINISHED":
            return
        self._result = failed_operation(
            f"stop-with-savepoint of job {self.job_id}: the savepoint {self.savepoint_path} completed, but task "
            f"{task} ended {state} instead of FINISHED, so the job did not stop with it",
            exception_class="FlinkException",
        )

    def job_terminated(self, status: str) -> None:
        if self.done:
            return
        if self.savepoint_path is None:
            self._result = failed_operation(
                f"stop-with-savepoint of job {self.job_id} failed: the job ended {status} before the "
                f"savepoint completed"
            )
        elif status == "FINISHED":
            self._result = completed_operation(self.savepoint_path)
        else:
            self._result = failed_operation(
                f"stop-with-savepoint of job {self.job_id}: the savepoint {self.savepoint_path} completed, but "
                f"the job ended {status} instead of FINISHED",
                exception_class="FlinkException",
            )
