"""A task's part of checkpointing (Flink's ``SubtaskCheckpointCoordinator``), run on the task
thread from its mailbox (see ``docs/STATE_AND_EVENT_TIME.md``).

``checkpoint`` snapshots the chain, forwards the barrier and acknowledges to the JobMaster once
the state is written (and, for an unaligned checkpoint, once the input channel state recorded
until the last barrier is, ``channel_state.ChannelStateWriter``). Acknowledgements and declines
leave the task thread: they go to the JobMaster (its ``CheckpointResponder``) from a small pool.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from yarnflink.checkpoint.barriers import CancelCheckpointMarker, CheckpointBarrier
from yarnflink.checkpoint.storage import FsCheckpointStorage, make_config_reader, storage_options_from_config
from yarnflink.jobmaster.gateway import CheckpointMetrics
from yarnflink.metrics.task import TaskIOMetrics
from yarnflink.network import BlockingResultPartition, ResultPartition
from yarnflink.operators.chain import OperatorChain
from yarnflink.state.handles import OperatorSubtaskState, TaskStateSnapshot
from yarnflink.state.task_state import LazyStreamFactory, TaskStateManager, snapshot_chain
from yarnflink.taskexecutor.channel_state import ChannelStateWriter
from yarnflink.taskexecutor.checkpoint_responder import CheckpointResponder

log = logging.getLogger(__name__)

#: acknowledgements and declines go to the JobMaster off the task threads
_ACKS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="checkpoint-ack")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class CheckpointTrigger:
    """The JobMaster starts checkpoint ``checkpoint_id`` at this task (a source, or a task whose
    inputs all ended). ``synchronous``: the savepoint of a stop-with-savepoint; ``drain``:
    MAX_WATERMARK first."""

    checkpoint_id: int
    timestamp: int
    is_savepoint: bool = False
    synchronous: bool = False
    drain: bool = False


@dataclass(frozen=True, slots=True)
class TaskStateRestore:
    """What a task restores from: the checkpoint storage to write new checkpoints to (None:
    state inline in the acknowledgement), the restored snapshot, and the state manager."""

    storage: FsCheckpointStorage | None
    restored: TaskStateSnapshot | None
    manager: TaskStateManager


def open_task_state(
    config: dict, job_id: str, directory: str, inline_threshold: int, task_state: bytes, restored_checkpoint_id: int
) -> TaskStateRestore:
    """The checkpoint storage under ``directory`` (empty: none; connected now, not on the first
    checkpoint's thread) and the state manager of a task restored from ``task_state`` (a JSON
    ``TaskStateSnapshot``, empty: none)."""
    storage = None
    if directory:
        options = storage_options_from_config(config, directory)
        storage = FsCheckpointStorage(directory, job_id, storage_options=options, inline_threshold=inline_threshold)
        storage.connect()
    restored = TaskStateSnapshot.from_json(json.loads(task_state.decode("utf-8"))) if task_state else None
    manager = TaskStateManager(
        restored=restored,
        restored_checkpoint_id=restored_checkpoint_id or None,
        reader=make_config_reader(config),
        config=config,
    )
    return TaskStateRestore(storage, restored, manager)


class SubtaskCheckpointCoordinator:
    """Snapshots, barriers, acknowledgements and declines of one task."""

    def __init__(
        self,
        task_name: str,
        attempt_number: int,
        partitions: list[ResultPartition | BlockingResultPartition],
        io_metrics: TaskIOMetrics,
        responder: CheckpointResponder,
        channel_state: ChannelStateWriter,
    ) -> None:
        self.task_name = task_name
        self.attempt_number = attempt_number
        self.partitions = partitions
        self.io_metrics = io_metrics
        self._responder = responder
        self.channel_state = channel_state
        self.storage: FsCheckpointStorage | None = None
        self.last_checkpoint = 0
        #: checkpoint id -> (monotonic s, wall ms) of its first barrier here (alignment, start delay)
        self._first_barrier: dict[int, tuple[float, int]] = {}

    def on_barrier_received(self, checkpoint_id: int) -> None:
        self._first_barrier.setdefault(checkpoint_id, (time.monotonic(), now_ms()))

    def checkpoint(
        self,
        chain: OperatorChain,
        checkpoint_id: int,
        timestamp: int,
        unaligned: bool = False,
        is_savepoint: bool = False,
        synchronous: bool = False,
        drain: bool = False,
    ) -> bool:
        """Snapshot the chain, forward the barrier, acknowledge once the state is written (and,
        ``unaligned``, once the input channel state recorded until the last barrier is). The
        forwarded barrier says whether it belongs to a savepoint (handled aligned downstream),
        and whether to a stop-with-savepoint (``synchronous``: the task is suspended after it).
        True if the barrier went out (False: an old checkpoint, or declined)."""
        if checkpoint_id <= self.last_checkpoint:
            return False
        self.last_checkpoint = checkpoint_id
        # per-subtask statistics (Flink's SubtaskStateStats): alignment = first barrier to the
        # last one, start delay = trigger to the first barrier, sync part = up to the barrier
        # going out, async part = until the state is written
        started = time.monotonic()
        first = self._first_barrier.get(checkpoint_id)
        self.forget_barriers(checkpoint_id)
        alignment_ms = (started - first[0]) * 1000.0 if first is not None else 0.0
        start_delay_ms = max(0, (first[1] if first is not None else now_ms()) - timestamp)
        for nid in chain.order:
            pre = getattr(chain.operators[nid], "prepare_snapshot_pre_barrier", None)
            if pre is not None:
                pre(checkpoint_id)
        chain.flush()
        try:
            storage = self.storage
            factory = (
                LazyStreamFactory(
                    lambda: storage.stream_factory(checkpoint_id),
                    shared_state=not is_savepoint,
                    shared_prefix=storage.shared_url + "/",
                )
                if storage is not None
                else None
            )
            channel_future = self.channel_state.begin(checkpoint_id, factory) if unaligned else None
            future: Future = snapshot_chain(chain, checkpoint_id, timestamp, factory)
        except Exception as e:  # noqa: BLE001 - declined, the job goes on
            self.channel_state.discard(checkpoint_id)
            log.info("task %s: checkpoint %d failed: %s", self.task_name, checkpoint_id, e)
            self.decline(checkpoint_id, f"{type(e).__name__}: {e}")
            self._cancel_downstream(checkpoint_id)
            return False
        barrier = CheckpointBarrier(checkpoint_id, timestamp, is_savepoint, synchronous, drain)
        for p in self.partitions:
            p.emit_event(barrier)
        synced = time.monotonic()
        sync_ms = (synced - started) * 1000.0
        head_id = getattr(getattr(chain.head, "ctx", None), "operator_id", "") or str(chain.order[0])

        def acknowledge(f: Future) -> None:
            if channel_future is not None and not channel_future.done():
                channel_future.add_done_callback(lambda _cf: acknowledge(f))
                return
            try:
                snapshot: TaskStateSnapshot = f.result()
                if channel_future is not None:
                    if channel_future.cancelled():
                        return  # aborted: declined already (or the coordinator aborted it)
                    handles = channel_future.result()
                    if handles:
                        head = snapshot.subtask_states.setdefault(head_id, OperatorSubtaskState())
                        head.input_channel_state.extend(handles)
            except BaseException as e:  # noqa: BLE001
                _ACKS.submit(self.decline, checkpoint_id, f"{type(e).__name__}: {e}")
                return
            async_ms = (time.monotonic() - synced) * 1000.0
            size = snapshot.state_size
            metrics = CheckpointMetrics(
                sync_ms=round(sync_ms, 3),
                async_ms=round(async_ms, 3),
                alignment_ms=round(alignment_ms, 3),
                start_delay_ms=start_delay_ms,
                state_size=size,
                checkpointed_size=size,
                persisted_data=snapshot.persisted_data if unaligned else 0,
                unaligned=unaligned,
            )
            self.io_metrics.checkpoint_completed(
                round(sync_ms + async_ms), size, round(alignment_ms), int(start_delay_ms * 1_000_000)
            )
            _ACKS.submit(
                self._respond_quietly,
                "acknowledging",
                checkpoint_id,
                lambda: self._responder.acknowledge_checkpoint(checkpoint_id, self.attempt_number, snapshot, metrics),
            )

        future.add_done_callback(acknowledge)
        return True

    def abort_on_barrier(self, checkpoint_id: int, reason: str) -> None:
        """The barrier handler gave checkpoint ``checkpoint_id`` up (a cancel marker, a newer
        barrier, an ended channel): decline it and tell the consumers."""
        self.forget_barriers(checkpoint_id)
        self.channel_state.discard(checkpoint_id)
        self.decline(checkpoint_id, reason)
        self._cancel_downstream(checkpoint_id)

    def on_checkpoint_aborted(self, checkpoint_id: int) -> None:
        self.channel_state.discard(checkpoint_id)

    def forget_barriers(self, checkpoint_id: int) -> None:
        for cid in [c for c in self._first_barrier if c <= checkpoint_id]:
            del self._first_barrier[cid]

    def _cancel_downstream(self, checkpoint_id: int) -> None:
        for p in self.partitions:
            p.emit_event(CancelCheckpointMarker(checkpoint_id))

    def decline(self, checkpoint_id: int, reason: str) -> None:
        _ACKS.submit(
            self._respond_quietly,
            "declining",
            checkpoint_id,
            lambda: self._responder.decline_checkpoint(checkpoint_id, self.attempt_number, reason),
        )

    def _respond_quietly(self, what: str, checkpoint_id: int, respond: Callable[[], None]) -> None:
        try:
            respond()
        except Exception as e:  # noqa: BLE001 - the checkpoint times out instead
            log.info("task %s: %s checkpoint %d failed: %s", self.task_name, what, checkpoint_id, e)
