"""What a job starts from, read from storage and ZooKeeper (off the loop): the I/O half of
``yarnflink.checkpoint.restore``, whose ``RestorePlanner`` decides with what is read here.

* With HA, the latest completed checkpoint whose pointer is in ZooKeeper (a job recovered by a
  new leader resumes from it, ahead of ``execution.savepoint.path``), with the older retained
  ones; if it is damaged, the newest valid checkpoint of the job's directory.
* Else ``execution.savepoint.path`` (``yarnflink run -s PATH``): that savepoint or checkpoint, or
  the newest valid checkpoint of a job's checkpoint directory.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from yarnflink.checkpoint import restore as rp
from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint
from yarnflink.checkpoint.options import SavepointConfigOptions
from yarnflink.checkpoint.storage import FsCheckpointStorage, resolve_restore_location, storage_options_from_config
from yarnflink.common.config import Configuration

if TYPE_CHECKING:
    from yarnflink.highavailability.checkpoints import JobCheckpointRecovery

log = logging.getLogger(__name__)
T = TypeVar("T")


async def run_off_loop(fn: Callable[..., T], *args: Any) -> T:
    """A blocking storage or ZooKeeper call, off the loop."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


def _now_ms() -> int:
    return int(time.time() * 1000)


async def read_initial_state(
    config: Configuration, storage: FsCheckpointStorage | None, ha: JobCheckpointRecovery | None, job_id: str
) -> rp.ResumedFromHa | rp.StartedFromSavepoint | None:
    """What the job starts from (None: from scratch). Raises, naming the path and the problem,
    if a savepoint or checkpoint given cannot be read."""
    if ha is not None and storage is not None:
        resumed = await _read_from_ha(storage, ha, job_id)
        if resumed is not None:
            return resumed
    path = config.get_string(SavepointConfigOptions.SAVEPOINT_PATH)
    if not path:
        return None
    found = await run_off_loop(resolve_restore_location, path, storage_options_from_config(config, path))
    for skipped in found.skipped:
        log.warning(
            "job %s: not restoring %s: %s (falling back to an older checkpoint)", job_id, skipped.path, skipped.problem
        )
    assert found.checkpoint is not None
    return rp.StartedFromSavepoint(found.checkpoint, path, tuple(str(s) for s in found.skipped), _now_ms())


async def _read_from_ha(
    storage: FsCheckpointStorage, ha: JobCheckpointRecovery, job_id: str
) -> rp.ResumedFromHa | None:
    retained: list[tuple[int, str]] = await run_off_loop(ha.retained)
    if not retained:
        return None
    cid, pointer = retained[-1]
    older: list[CompletedCheckpoint] = []
    skipped: tuple[str, ...] = ()
    try:
        checkpoint = await run_off_loop(storage.read_metadata, pointer)
        await run_off_loop(storage.validate, checkpoint)
        older = await run_off_loop(_read_retained, storage, retained[:-1], job_id)
    except CheckpointMetadataError as e:  # damaged: the newest valid one of the job's directory
        found = await run_off_loop(storage.find_latest_valid)
        if found.checkpoint is None:
            raise
        skipped = (str(e), *(str(s) for s in found.skipped if s.path != e.path))
        log.warning(
            "job %s: checkpoint %d cannot be restored (%s); falling back to checkpoint %d",
            job_id,
            cid,
            e,
            found.checkpoint.checkpoint_id,
        )
        checkpoint = found.checkpoint
        pointer = checkpoint.external_pointer or pointer
    log.info("job %s: resuming from checkpoint %d (%s)", job_id, checkpoint.checkpoint_id, pointer)
    return rp.ResumedFromHa(checkpoint, pointer, cid, tuple(older), skipped, _now_ms())


def _read_retained(
    storage: FsCheckpointStorage, entries: list[tuple[int, str]], job_id: str
) -> list[CompletedCheckpoint]:
    """The older retained checkpoints' metadata; one that cannot be read is logged and left
    where it is (neither restored nor deleted)."""
    found = []
    for cid, pointer in entries:
        try:
            found.append(storage.read_metadata(pointer))
        except Exception as e:  # noqa: BLE001 - damaged or unreachable: only this one is left out
            log.warning("job %s: retained checkpoint %d is not taken over: %s", job_id, cid, e)
    return found
