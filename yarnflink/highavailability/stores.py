"""The HA stores' contracts, their in-memory forms (standalone and embedded services), and the
recovery decision a new leader's Dispatcher takes from them. Pure: no ZooKeeper, no filesystem.

* ``JobGraphStore``: the JobGraphs of submitted jobs that have not ended for good (Flink's
  ``JobGraphStore``). With ZooKeeper: the JSON in the storageDir, a pointer to it in ZooKeeper.
* ``JobResultStore``: one entry per job that reached a globally terminal state (FINISHED, FAILED,
  CANCELED); *dirty* until the job's HA data is cleaned up, then *clean* (Flink's
  ``JobResultStore``). A job with an entry is never run again.
* ``CheckpointIDCounter``: the next checkpoint id of a job, shared by all its leaders.
* ``CompletedCheckpointPointerStore``: which checkpoints of a job completed, oldest first, each as
  a pointer (the path of its metadata, written by the checkpoint package); the HA half of Flink's
  ``CompletedCheckpointStore``.

Writes of a leader carry its ``LeaderFence`` (set when the store is made): the ZooKeeper stores
refuse the write (``LeadershipLostError``) once that leadership is over. The in-memory stores made by
``EmbeddedHaServices`` check the fence the same way; standalone stores need none.

Every method may block on I/O in the ZooKeeper forms: call them from a worker thread
(``loop.run_in_executor``), never on a component's loop.
"""

from __future__ import annotations

import copy
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Self, TypeVar

from yarnflink.highavailability.errors import HaStoreError
from yarnflink.highavailability.leaderelection import LeaderFence
from yarnflink.jobgraph.jobgraph import JobGraph

__all__ = [
    "APPLICATION_STATUS",
    "GLOBALLY_TERMINAL",
    "INITIAL_CHECKPOINT_ID",
    "CheckpointIDCounter",
    "CompletedCheckpointPointerStore",
    "FenceCheck",
    "InMemoryCheckpointIDCounter",
    "InMemoryCompletedCheckpointPointerStore",
    "InMemoryJobGraphStore",
    "InMemoryJobResultStore",
    "JobGraphStore",
    "JobResult",
    "JobResultStore",
    "RecoveryPlan",
    "plan_recovery",
    "recover_jobs",
]

#: Job statuses after which a job never runs again (Flink's ``JobStatus.isGloballyTerminalState``).
GLOBALLY_TERMINAL = frozenset({"FINISHED", "FAILED", "CANCELED"})
#: Job status -> Flink's ``ApplicationStatus`` as a job result records it.
APPLICATION_STATUS = {"FINISHED": "SUCCEEDED", "FAILED": "FAILED", "CANCELED": "CANCELED"}
INITIAL_CHECKPOINT_ID = 1
S = TypeVar("S", bound="_Fenced")

#: Raises ``LeadershipLostError`` if the given fence's leadership is over.
FenceCheck = Callable[[LeaderFence], None]


@dataclass(frozen=True)
class JobResult:
    """How a job ended for good (Flink's ``JobResult``, what a JobResultStore entry holds)."""

    job_id: str
    job_status: str  # FINISHED | FAILED | CANCELED
    net_runtime_ms: int = 0
    failure_cause: str | None = None

    def __post_init__(self) -> None:
        if self.job_status not in GLOBALLY_TERMINAL:
            raise ValueError(f"job {self.job_id}: {self.job_status} is not a globally terminal job status")

    @property
    def application_status(self) -> str:
        return APPLICATION_STATUS[self.job_status]

    def to_json(self) -> dict[str, Any]:
        """Flink's JobResultEntry JSON shape, plus the job status."""
        result: dict[str, Any] = {
            "id": self.job_id,
            "application-status": self.application_status,
            "job-status": self.job_status,
            "net-runtime": self.net_runtime_ms,
            "accumulator-results": {},
        }
        if self.failure_cause is not None:
            result["failure-cause"] = self.failure_cause
        return {"version": 1, "result": result}

    @staticmethod
    def from_json(d: Any) -> JobResult:
        try:
            r = d["result"]
            return JobResult(str(r["id"]), str(r["job-status"]), int(r.get("net-runtime", 0)), r.get("failure-cause"))
        except (KeyError, TypeError, ValueError) as e:
            raise HaStoreError(f"not a job result entry: {e}") from None


# ----------------------------------------------------------------------------- contracts
class JobGraphStore(ABC):
    @abstractmethod
    def put_job_graph(self, job_graph: Any) -> None:
        """Stores (or replaces) a ``JobGraph``; durable when this returns."""

    @abstractmethod
    def recover_job_graph(self, job_id: str) -> Any | None:
        """The stored ``JobGraph`` of ``job_id`` (None if there is none)."""

    @abstractmethod
    def get_job_ids(self) -> list[str]: ...

    @abstractmethod
    def global_cleanup(self, job_id: str) -> None:
        """Removes the job's graph for good (idempotent)."""

    def local_cleanup(self, job_id: str) -> None:
        """Releases what this process holds of the job's graph, keeping it for other leaders."""


class JobResultStore(ABC):
    @abstractmethod
    def create_dirty_result(self, result: JobResult) -> None:
        """Records that the job ended for good; HaStoreError if it has an entry already."""

    @abstractmethod
    def mark_result_as_clean(self, job_id: str) -> None:
        """The job's HA data is gone. No-op if the entry is clean (or, when clean entries are
        deleted on commit, gone); else HaStoreError if there is no dirty entry."""

    @abstractmethod
    def has_dirty_job_result_entry(self, job_id: str) -> bool: ...

    @abstractmethod
    def has_clean_job_result_entry(self, job_id: str) -> bool: ...

    def has_job_result_entry(self, job_id: str) -> bool:
        return self.has_dirty_job_result_entry(job_id) or self.has_clean_job_result_entry(job_id)

    @abstractmethod
    def get_dirty_results(self) -> list[JobResult]: ...


class CheckpointIDCounter(ABC):
    @abstractmethod
    def start(self) -> None:
        """Creates the counter at ``INITIAL_CHECKPOINT_ID`` unless it exists."""

    @abstractmethod
    def get_and_increment(self) -> int: ...

    @abstractmethod
    def get(self) -> int: ...

    @abstractmethod
    def set_count(self, count: int) -> None: ...

    @abstractmethod
    def shutdown(self, job_status: str) -> None:
        """Removes the counter if ``job_status`` is globally terminal, else keeps it."""


class CompletedCheckpointPointerStore(ABC):
    max_retained: int

    @abstractmethod
    def add_checkpoint(self, checkpoint_id: int, pointer: str) -> list[tuple[int, str]]:
        """Adds a completed checkpoint and drops the oldest beyond ``max_retained``, atomically;
        returns the dropped ``(id, pointer)`` pairs, whose data the caller discards."""

    @abstractmethod
    def get_all(self) -> list[tuple[int, str]]:
        """``(checkpoint id, pointer)`` pairs, oldest first."""

    def get_latest(self) -> tuple[int, str] | None:
        entries = self.get_all()
        return entries[-1] if entries else None

    @abstractmethod
    def remove(self, checkpoint_id: int) -> None:
        """Removes the pointer (a fenced write; no-op if absent, but ``LeadershipLostError`` if
        the writer's leadership is over either way): only after it may the files go."""

    def check_leadership(self) -> None:
        """``LeadershipLostError`` if the writer's leadership is over (a fenced no-op write);
        standalone stores have no fence."""

    @abstractmethod
    def shutdown(self, job_status: str) -> list[tuple[int, str]]:
        """If ``job_status`` is globally terminal: removes every pointer and returns them (for the
        caller to discard); else keeps them for the next leader and returns []."""


# ----------------------------------------------------------------------------- recovery
@dataclass(frozen=True)
class RecoveryPlan:
    """What a Dispatcher that just became leader does: run ``jobs_to_recover`` (their graphs are in
    the JobGraphStore and they never ended), and finish the cleanup of ``dirty_results`` (jobs that
    ended for good under an earlier leader whose cleanup did not complete)."""

    jobs_to_recover: tuple[str, ...]
    dirty_results: tuple[JobResult, ...]
    #: Graphs of jobs that have a job result already: never run; their graphs are to be removed.
    stale_job_graphs: tuple[str, ...] = ()


def plan_recovery(
    stored_job_ids: Iterable[str], dirty_results: Iterable[JobResult], has_result: Callable[[str], bool]
) -> RecoveryPlan:
    dirty = tuple(sorted(dirty_results, key=lambda r: r.job_id))
    dirty_ids = {r.job_id for r in dirty}
    recover: list[str] = []
    stale: list[str] = []
    for job_id in sorted(set(stored_job_ids)):
        if job_id in dirty_ids:
            continue
        (stale if has_result(job_id) else recover).append(job_id)
    return RecoveryPlan(tuple(recover), dirty, tuple(stale))


def recover_jobs(job_graph_store: JobGraphStore, job_result_store: JobResultStore) -> RecoveryPlan:
    return plan_recovery(
        job_graph_store.get_job_ids(), job_result_store.get_dirty_results(), job_result_store.has_job_result_entry
    )


# ----------------------------------------------------------------------------- in memory
class _Fenced:
    def __init__(self, fence: LeaderFence | None, check: FenceCheck | None) -> None:
        self._fence = fence
        self._check = check
        self._lock = threading.Lock()

    def fenced(self, fence: LeaderFence | None, check: FenceCheck | None) -> Self:
        """A view sharing this store's data (and lock) whose writes check ``fence``."""
        view = copy.copy(self)
        view._fence, view._check = fence, check  # type: ignore[attr-defined]
        return view

    def _check_fence(self) -> None:
        if self._fence is not None and self._check is not None:
            self._check(self._fence)


class InMemoryJobGraphStore(JobGraphStore, _Fenced):
    def __init__(
        self, fence: LeaderFence | None = None, check: FenceCheck | None = None, data: dict[str, Any] | None = None
    ) -> None:
        _Fenced.__init__(self, fence, check)
        self._graphs: dict[str, Any] = data if data is not None else {}

    def put_job_graph(self, job_graph: Any) -> None:
        with self._lock:
            self._check_fence()
            self._graphs[job_graph.job_id] = job_graph.to_json()

    def recover_job_graph(self, job_id: str) -> Any | None:
        with self._lock:
            data = self._graphs.get(job_id)
        return None if data is None else JobGraph.from_json(data)

    def get_job_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._graphs)

    def global_cleanup(self, job_id: str) -> None:
        with self._lock:
            self._check_fence()
            self._graphs.pop(job_id, None)


class InMemoryJobResultStore(JobResultStore):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dirty: dict[str, JobResult] = {}
        self._clean: dict[str, JobResult] = {}

    def create_dirty_result(self, result: JobResult) -> None:
        with self._lock:
            if result.job_id in self._dirty or result.job_id in self._clean:
                raise HaStoreError(f"the job result store already has an entry for job {result.job_id}")
            self._dirty[result.job_id] = result

    def mark_result_as_clean(self, job_id: str) -> None:
        with self._lock:
            if job_id in self._clean:
                return
            if job_id not in self._dirty:
                raise HaStoreError(f"no dirty job result entry for job {job_id}")
            self._clean[job_id] = self._dirty.pop(job_id)

    def has_dirty_job_result_entry(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._dirty

    def has_clean_job_result_entry(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._clean

    def get_dirty_results(self) -> list[JobResult]:
        with self._lock:
            return sorted(self._dirty.values(), key=lambda r: r.job_id)


class InMemoryCheckpointIDCounter(CheckpointIDCounter, _Fenced):
    def __init__(self, fence: LeaderFence | None = None, check: FenceCheck | None = None) -> None:
        _Fenced.__init__(self, fence, check)
        self._next = [INITIAL_CHECKPOINT_ID]  # a cell: fenced views share it

    def start(self) -> None:
        pass

    def get_and_increment(self) -> int:
        with self._lock:
            self._check_fence()
            value = self._next[0]
            self._next[0] = value + 1
            return value

    def get(self) -> int:
        return self._next[0]

    def set_count(self, count: int) -> None:
        with self._lock:
            self._check_fence()
            self._next[0] = count

    def shutdown(self, job_status: str) -> None:
        pass


class InMemoryCompletedCheckpointPointerStore(CompletedCheckpointPointerStore, _Fenced):
    def __init__(
        self, max_retained: int = 1, fence: LeaderFence | None = None, check: FenceCheck | None = None
    ) -> None:
        if max_retained < 1:
            raise ValueError("max_retained must be at least 1")
        _Fenced.__init__(self, fence, check)
        self.max_retained = max_retained
        self._entries: dict[int, str] = {}

    def add_checkpoint(self, checkpoint_id: int, pointer: str) -> list[tuple[int, str]]:
        with self._lock:
            self._check_fence()
            if checkpoint_id in self._entries:
                raise HaStoreError(f"checkpoint {checkpoint_id} is already in the store")
            self._entries[checkpoint_id] = pointer
            dropped = []
            while len(self._entries) > self.max_retained:
                oldest = min(self._entries)
                dropped.append((oldest, self._entries.pop(oldest)))
            return dropped

    def get_all(self) -> list[tuple[int, str]]:
        with self._lock:
            return sorted(self._entries.items())

    def remove(self, checkpoint_id: int) -> None:
        with self._lock:
            self._check_fence()
            self._entries.pop(checkpoint_id, None)

    def check_leadership(self) -> None:
        with self._lock:
            self._check_fence()

    def shutdown(self, job_status: str) -> list[tuple[int, str]]:
        if job_status not in GLOBALLY_TERMINAL:
            return []
        with self._lock:
            self._check_fence()
            entries = sorted(self._entries.items())
            self._entries.clear()
            return entries
