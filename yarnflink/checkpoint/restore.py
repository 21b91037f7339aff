"""What a job's tasks restore, as pure logic (Flink's ``CheckpointCoordinator.restoreLatestCheckpointedState``
and ``StateAssignmentOperation`` at deployment): events in, actions out; the driver reads the files.

* ``ResumedFromHa``: a job recovered by a new leader resumes from the latest checkpoint whose
  pointer is in ZooKeeper and owns every retained one (``CheckpointsRecovered`` for the
  coordinator). ``resume_from_ha`` builds it from what reading each retained pointer gave: a
  pointer whose ``_metadata`` is missing or corrupt, or whose state files are gone, is skipped
  for the previous valid one (each skip named with id, pointer and why), and the ids after the
  skipped ones stay unused; none valid: ``NoRestorableCheckpoint`` (the job fails, as Flink's
  does when it can read none of the checkpoints in its store).
* ``adopted`` (either event): a new leader adopts the running tasks (issue 18) -- they keep their
  state, nothing is restored or counted now; the checkpoints are owned for later restarts.
* ``StartedFromSavepoint``: ``execution.savepoint.path`` (``yarnflink run -s``): the state must fit
  the job (operators matched by uid) unless ``allow_non_restored_state``; else ``ValueError``
  naming the path and the problem. New checkpoints continue its numbering.
* ``CheckpointSkipped``: a checkpoint not restored (damaged), listed in ``warnings`` (REST:
  ``latest.restored.skipped``); ``CheckpointValidated``: its files were checked once.
* ``TaskDeploying``: a task is (re)deployed: ``RestoreState`` says what it restores -- the latest
  completed checkpoint on a restart, the savepoint at the first start -- assigned to the vertices
  as they are now (``assign_state``, computed once per checkpoint), and ``RestoreCounted`` once
  per restart (``GraphRescaled``: the vertices changed, the rescale's restore is counted too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from yarnflink.checkpoint import coordinator as cc
from yarnflink.checkpoint.assignment import RestoreVertex, assign_state, check_compatible
from yarnflink.checkpoint.metadata import CompletedCheckpoint
from yarnflink.state.handles import TaskStateSnapshot


# ----------------------------------------------------------------------------- events
@dataclass(frozen=True)
class ResumedFromHa:
    """``checkpoint`` (at ``pointer``) is restored; ``published_id`` the newest id in the HA
    store (higher than ``checkpoint``'s when that one was damaged); ``older`` the other retained
    checkpoints that could be read; ``skipped`` what was not restored, and why."""

    checkpoint: CompletedCheckpoint
    pointer: str
    published_id: int
    older: tuple[CompletedCheckpoint, ...]
    skipped: tuple[str, ...]
    now: int
    #: the new leader adopts the running tasks (issue 18): nothing is restored now; the job owns
    #: the retained checkpoints for later restarts (a region failover restores the latest)
    adopted: bool = False


@dataclass(frozen=True)
class StartedFromSavepoint:
    checkpoint: CompletedCheckpoint
    path: str
    skipped: tuple[str, ...]
    now: int
    adopted: bool = False  # as ResumedFromHa's: the running tasks started from it under an earlier leader


@dataclass(frozen=True)
class CheckpointSkipped:
    reason: str


@dataclass(frozen=True)
class CheckpointValidated:
    checkpoint_id: int


@dataclass(frozen=True)
class GraphRescaled:
    vertices: tuple[RestoreVertex, ...]


@dataclass(frozen=True)
class TaskDeploying:
    """A task of ``vertex_id`` is deployed; ``latest`` the latest completed checkpoint (the
    coordinator's), ``num_restarts`` the job's restarts so far."""

    vertex_id: str
    subtask_index: int
    attempt_number: int
    num_restarts: int
    latest: CompletedCheckpoint | None
    now: int


@dataclass(frozen=True)
class RetainedRead:
    """What reading one retained pointer of the HA store gave: the ``checkpoint`` (its
    ``_metadata`` read and its state files there), or ``problem``: why it cannot be restored."""

    checkpoint_id: int
    pointer: str
    checkpoint: CompletedCheckpoint | None = None
    problem: str = ""


class NoRestorableCheckpoint(Exception):
    """No checkpoint whose pointer is in the HA store can be restored."""


def resume_from_ha(reads: list[RetainedRead], now: int) -> ResumedFromHa:
    """The newest restorable checkpoint of ``reads`` (the HA store's pointers, any order); the
    newer ones are skipped, naming why, and the older restorable ones are owned (``older``)."""
    if not reads:
        raise ValueError("no retained checkpoint to resume from")
    newest_first = sorted(reads, key=lambda r: r.checkpoint_id, reverse=True)
    skipped: list[str] = []
    for i, r in enumerate(newest_first):
        problem = r.problem or _mismatch(r)
        if r.checkpoint is None or problem:
            skipped.append(
                f"checkpoint {r.checkpoint_id} ({r.pointer}) skipped on recovery: {problem or 'it was not read'}"
            )
            continue
        older = tuple(
            o.checkpoint
            for o in reversed(newest_first[i + 1 :])
            if o.checkpoint is not None and not (o.problem or _mismatch(o))
        )
        if skipped:
            skipped = [f"{s}; checkpoint {r.checkpoint_id} restored instead" for s in skipped]
        return ResumedFromHa(r.checkpoint, r.pointer, newest_first[0].checkpoint_id, older, tuple(skipped), now)
    raise NoRestorableCheckpoint(
        f"none of the {len(reads)} checkpoint(s) whose pointers are in the HA store can be restored: "
        + "; ".join(skipped)
    )


def _mismatch(r: RetainedRead) -> str:
    if r.checkpoint is not None and r.checkpoint.checkpoint_id != r.checkpoint_id:
        return f"its _metadata describes checkpoint {r.checkpoint.checkpoint_id}"
    return ""


Event = Union[ResumedFromHa, StartedFromSavepoint, CheckpointSkipped, CheckpointValidated, GraphRescaled, TaskDeploying]


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class RestoreState:
    """What the deployed task restores: ``state`` (None: nothing) of checkpoint ``checkpoint_id``
    (0: none)."""

    checkpoint_id: int
    state: TaskStateSnapshot | None


@dataclass(frozen=True)
class RestoreCounted:
    """The job restored ``checkpoint`` (the statistics count it; ``skipped``: what was left out)."""

    checkpoint: CompletedCheckpoint
    external_path: str
    skipped: tuple[str, ...]
    now: int


Action = Union[cc.CheckpointsRecovered, RestoreState, RestoreCounted]


class RestorePlanner:
    def __init__(self, vertices: list[RestoreVertex], allow_non_restored_state: bool = False) -> None:
        self.vertices = list(vertices)
        self.allow_non_restored_state = allow_non_restored_state
        #: what the first deployment restores (a savepoint, or the checkpoint an HA job resumes from)
        self.initial: CompletedCheckpoint | None = None
        #: checkpoints skipped on restore, and why
        self.warnings: list[str] = []
        self._validated: set[int] = set()
        self._assigned: dict[tuple[str, int], TaskStateSnapshot] = {}
        self._assigned_for = -1
        self._restored_at_restart = 0

    def needs_validation(self, checkpoint_id: int) -> bool:
        return checkpoint_id not in self._validated

    def handle(self, event: Event) -> list[Action]:
        if isinstance(event, ResumedFromHa):
            return self._resumed(event)
        if isinstance(event, StartedFromSavepoint):
            return self._started(event)
        if isinstance(event, CheckpointSkipped):
            self.warnings.append(event.reason)
        elif isinstance(event, CheckpointValidated):
            self._validated.add(event.checkpoint_id)
        elif isinstance(event, GraphRescaled):
            self.vertices = list(event.vertices)
            self._assigned_for = -1
            self._restored_at_restart = -1  # the rescale's restore is counted
        else:
            return self._deploying(event)
        return []

    def _resumed(self, e: ResumedFromHa) -> list[Action]:
        self.warnings += e.skipped
        self.initial = e.checkpoint
        cid = max(e.published_id, e.checkpoint.checkpoint_id)  # ids after a damaged one stay unused
        recovered = cc.CheckpointsRecovered(cid + 1, (*e.older, e.checkpoint))
        if e.adopted:
            return [recovered]
        return [recovered, RestoreCounted(e.checkpoint, e.pointer, tuple(self.warnings), e.now)]

    def _started(self, e: StartedFromSavepoint) -> list[Action]:
        self.warnings += e.skipped
        problem = check_compatible(e.checkpoint, self.vertices, self.allow_non_restored_state)
        if problem is not None:
            raise ValueError(problem)
        self.initial = e.checkpoint
        # new checkpoints of this job continue the numbering (Flink: the restored id + 1)
        recovered = cc.CheckpointsRecovered(e.checkpoint.checkpoint_id + 1)
        if e.adopted:
            return [recovered]
        return [
            recovered,
            RestoreCounted(e.checkpoint, e.checkpoint.external_pointer or e.path, tuple(self.warnings), e.now),
        ]

    def _deploying(self, e: TaskDeploying) -> list[Action]:
        """``CheckpointMetadataError`` if the checkpoint does not fit the job as it is now."""
        checkpoint = e.latest or self.initial
        if checkpoint is None:
            return [RestoreState(0, None)]
        if self._assigned_for != checkpoint.checkpoint_id:
            self._assigned = assign_state(checkpoint, self.vertices, self.allow_non_restored_state)
            self._assigned_for = checkpoint.checkpoint_id
        actions: list[Action] = []
        if e.attempt_number > 0 and self._restored_at_restart != e.num_restarts:
            self._restored_at_restart = e.num_restarts  # one restore per restart
            actions.append(RestoreCounted(checkpoint, checkpoint.external_pointer or "", tuple(self.warnings), e.now))
        actions.append(RestoreState(checkpoint.checkpoint_id, self._assigned.get((e.vertex_id, e.subtask_index))))
        return actions
