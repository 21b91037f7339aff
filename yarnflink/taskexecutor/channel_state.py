"""A task's in-flight data of unaligned checkpoints (Flink's ``ChannelStateWriter`` and the
recovery of input channel state).

Between an unaligned checkpoint's snapshot and its last barrier the barrier handler records the
batches that overtook the barrier; ``ChannelStateWriter`` writes them off the task thread and
completes the future the checkpoint's acknowledgement waits for. ``replay_channel_state`` puts
the batches a restored checkpoint persisted through the chain before any network input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pyarrow as pa

from yarnflink.checkpoint.barriers import ChannelStateComplete, UnalignedBarrierHandler
from yarnflink.checkpoint.channel_state import read_channel_state, write_channel_state
from yarnflink.checkpoint.storage import make_config_reader
from yarnflink.state.handles import TaskStateSnapshot

log = logging.getLogger(__name__)

#: input channel state of unaligned checkpoints is written off the task threads
_CHANNEL_WRITES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="channel-state")


class ChannelStateWriter:
    """checkpoint id -> (future of its input channel state handles, its state-file factory),
    from the snapshot until the last barrier's recording is written."""

    def __init__(self, name: str) -> None:
        self.name = name  # the task name and subtask index, in the state files' names
        self.num_channels = 0
        #: the unaligned barrier handler recording the in-flight batches (set with the input)
        self.handler: UnalignedBarrierHandler | None = None
        self._pending: dict[int, tuple[Future, Any]] = {}

    def begin(self, checkpoint_id: int, factory: Any) -> Future:
        future: Future = Future()
        self._pending[checkpoint_id] = (future, factory)
        return future

    def write(self, done: ChannelStateComplete) -> None:
        """Every barrier of an unaligned checkpoint arrived: write the recorded in-flight batches
        (off the task thread) and complete the future its acknowledgement waits for."""
        entry = self._pending.pop(done.checkpoint_id, None)
        if entry is None:
            return  # its snapshot failed (declined already)
        future, factory = entry
        recorded = {ch: [it.batch for it in items] for ch, items in done.recorded.items()}
        if not recorded:
            future.set_result([])
            return
        num_channels = self.num_channels
        name = f"{self.name}-chk-{done.checkpoint_id}"

        def write() -> None:
            try:
                future.set_result(write_channel_state(recorded, num_channels, factory, name))
            except BaseException as e:  # noqa: BLE001 - declines the checkpoint
                future.set_exception(e)

        _CHANNEL_WRITES.submit(write)

    def discard(self, checkpoint_id: int) -> None:
        """An aborted checkpoint (and older ones): drop the incomplete recording."""
        if self.handler is not None:
            self.handler.abort(checkpoint_id)
        for cid in [c for c in self._pending if c <= checkpoint_id]:
            self._pending.pop(cid)[0].cancel()


def replay_channel_state(
    restored: TaskStateSnapshot | None,
    config: dict[str, Any],
    num_channels: int | None,
    where: str,
    task_name: str,
    push: Callable[[pa.RecordBatch], None],
) -> None:
    """Restored from an unaligned checkpoint: the in-flight batches it persisted go to ``push``
    (channel order) before anything is read from the network."""
    if restored is None:
        return
    handles = [h for st in restored.subtask_states.values() for h in st.input_channel_state]
    if not handles:
        return
    batches = read_channel_state(handles, make_config_reader(config), num_channels, where)
    log.info("task %s: replaying %d in-flight batches of %s", task_name, len(batches), where)
    for rb in batches:
        push(rb)
