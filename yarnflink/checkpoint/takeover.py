"""What a new leader's CheckpointCoordinator does with checkpoints when it *adopts* a job's running
tasks instead of redeploying them (issue 18: master failover that running jobs do not notice), as
pure logic. The coordinator's ``TasksAdopted`` event runs it; the driver reads the inputs.

What the new leader knows, from the HA store, before it draws its first checkpoint id:

* ``published_id``: the newest checkpoint whose pointer is in ZooKeeper (``jobs/<id>/checkpoints``,
  0: none). A pointer is written last, by a fenced write, so this checkpoint *completed*; but the
  leader that completed it may have died before every task heard of it.
* ``handed_out_below``: the value of the shared checkpoint id counter. Every id below it was handed
  out to an earlier leader; those above ``published_id`` never completed, and no pointer can name
  them any more (an earlier leader's pointer writes are fenced off).

What it decides:

1. **The latest completed checkpoint is notified** (``NotifyCheckpointComplete`` to every adopted
   running task), whether or not its notice reached the tasks before the crash. A task that had it
   already gets it twice: the two-phase-commit ``FileSink`` commits the files pending for
   checkpoints up to that id and forgets them, so a second notice commits nothing (exactly once).
2. **Checkpoints in flight at the crash are aborted**: each id in ``(published_id,
   handed_out_below)`` (at most ``IN_FLIGHT_LIMIT``, the newest: older ones were long subsumed at
   the tasks) gets ``NotifyCheckpointAborted`` (a task still aligning its barriers gives it up; a
   stop-with-savepoint's suspended task resumes, as after any failed stop) and ``DiscardIncomplete``
   (its ``chk-<n>`` directory goes through ``checkpoint/cleanup.py``: after a fenced check that
   this leader leads). Their acknowledgements, still queued at TaskExecutors for the next leader,
   arrive late and their state is discarded as any late acknowledgement's. Not counted as
   checkpoint failures. Files a sink wrote for such a checkpoint stay pending at the task and are
   committed with the next completed checkpoint, whose state covers them.
3. **Ids continue** past both: no id an earlier leader may have used is used again.
4. **Savepoint triggers are the old leader's memory**: the new one does not know their ids, and a
   savepoint in flight was aborted with its checkpoint id (2.). ``GET /jobs/:id/savepoints/:trigger``
   of the new leader answers, for a trigger id it does not know, a *failed* operation result
   naming the takeover (``SavepointTracker.taken_over``), never a 404 that reads as a typo.
"""

from __future__ import annotations

#: how many checkpoint ids below the counter a new leader tells the tasks to abort
IN_FLIGHT_LIMIT = 16

#: abort reason of a checkpoint whose leader is gone (not a counted failure)
LEADER_CHANGE = "CHECKPOINT_COORDINATOR_LEADER_CHANGE"


def in_flight_ids(published_id: int, handed_out_below: int, limit: int = IN_FLIGHT_LIMIT) -> list[int]:
    """The checkpoint ids an earlier leader may have triggered that never completed (ascending)."""
    if published_id < 0 or handed_out_below < 1:
        raise ValueError(f"bad takeover state: published {published_id}, counter at {handed_out_below}")
    low = max(published_id + 1, handed_out_below - limit, 1)
    return list(range(low, handed_out_below))


def abort_reason(checkpoint_id: int, published_id: int) -> str:
    after = f" (the latest completed is {published_id})" if published_id else ""
    return (
        f"{LEADER_CHANGE}: checkpoint {checkpoint_id} was in flight when its leader was lost{after}; "
        "the new leader adopted the running tasks and aborts it"
    )


def unknown_trigger_reason(trigger_id: str, job_id: str, handed_out_below: int) -> str:
    """What the new leader answers for a savepoint trigger id it does not know."""
    return (
        f"savepoint trigger {trigger_id} is unknown to this leader: it took job {job_id} over from an "
        f"earlier leader (checkpoint ids below {handed_out_below} were handed out before), and a "
        "savepoint triggered there failed with it: the leader that accepted it is gone, and an "
        "unfinished savepoint is aborted on a takeover. Trigger the savepoint again."
    )
