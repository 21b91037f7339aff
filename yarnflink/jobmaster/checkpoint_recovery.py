"""What a job starts from, read from storage and ZooKeeper (off the loop): the I/O half of
``yarnflink.checkpoint.restore``, whose ``RestorePlanner`` decides with what is read here.

* With HA, the latest completed checkpoint whose pointer is in ZooKeeper (a job recovered by a
  new leader resumes from it, ahead of ``execution.savepoint.path``), with the older retained
  ones; one whose ``_metadata`` or state files are missing or damaged is skipped for the
  previous retained one, and if none can be restored the job fails, naming each and why.
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
from yarnflink.checkpoint.cleanup import orphaned_on_recovery, unreferenced_shared
from yarnflink.checkpoint.metadata import CheckpointMetadataError
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
    """The newest retained checkpoint whose files are intact (``rp.resume_from_ha`` decides);
    NoRestorableCheckpoint if none is; CheckpointStorageError if the storage cannot be read."""
    retained: list[tuple[int, str]] = await run_off_loop(ha.retained)
    if not retained:
        return None
    reads = await run_off_loop(_read_retained, storage, retained, job_id)
    resumed = rp.resume_from_ha(reads, _now_ms())
    for skipped in resumed.skipped:
        log.warning("job %s: %s", job_id, skipped)
    log.info("job %s: resuming from checkpoint %d (%s)", job_id, resumed.checkpoint.checkpoint_id, resumed.pointer)
    return resumed


async def orphaned_directories(storage: FsCheckpointStorage, ha: JobCheckpointRecovery) -> list[int]:
    """Ids of the job's ``chk-<n>`` directories that earlier leaders left and no pointer can name
    (``yarnflink.checkpoint.cleanup.orphaned_on_recovery``); read before this leader draws an id."""
    bound = await run_off_loop(ha.next_id)
    retained = [cid for cid, _ in await run_off_loop(ha.retained)]
    directories = await run_off_loop(storage.checkpoint_ids)
    return orphaned_on_recovery(directories, retained, bound)


async def orphaned_shared_files(
    storage: FsCheckpointStorage, ha: JobCheckpointRecovery, referenced: set[str]
) -> list[str]:
    """URLs of the job's shared state files that earlier leaders left and no retained checkpoint
    refers to (``yarnflink.checkpoint.cleanup.unreferenced_shared``)."""
    bound = await run_off_loop(ha.next_id)
    files = await run_off_loop(storage.shared_files)
    return unreferenced_shared(files, referenced, bound)


def _read_retained(storage: FsCheckpointStorage, entries: list[tuple[int, str]], job_id: str) -> list[rp.RetainedRead]:
    """Each retained checkpoint's ``_metadata``, its state files checked; a missing or damaged
    one is a problem to skip (a storage that cannot be read raises)."""
    reads = []
    for cid, pointer in entries:
        try:
            checkpoint = storage.read_metadata(pointer)
            if checkpoint.job_id != job_id:
                raise CheckpointMetadataError(pointer, f"it belongs to job {checkpoint.job_id}")
            storage.validate(checkpoint)
        except CheckpointMetadataError as e:
            reads.append(rp.RetainedRead(cid, pointer, problem=e.problem))
            continue
        reads.append(rp.RetainedRead(cid, pointer, checkpoint))
    return reads
