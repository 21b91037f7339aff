"""A task's network input (Flink's ``StreamTaskNetworkInput`` and ``CheckpointedInputGate``).

``StreamTaskNetworkInput`` hands one element of the input gate to the chain: a batch goes in as
it is; watermarks and watermark statuses of the channels are combined first (Flink's
``StatusWatermarkValve``; an ended upstream sends MAX_WATERMARK before it ends).

``CheckpointedInput`` puts the barrier handler in front of it: barriers, cancel markers and ends
of channel go to the handler, and the handler's actions come back as elements to process,
checkpoints to take, recordings to write and checkpoints to decline.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yarnflink.checkpoint.barriers import (
    AbortCheckpointOnBarrier,
    AlignedBarrierHandler,
    BarrierTracker,
    CancelCheckpointMarker,
    ChannelStateComplete,
    CheckpointBarrier,
    ProcessBuffer,
    TriggerCheckpointOnBarrier,
    UnalignedBarrierHandler,
)
from yarnflink.common.records import Batch
from yarnflink.metrics.task import TaskIOMetrics
from yarnflink.network import BufferOrEvent
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.watermarks import StatusWatermarkValve, Watermark, WatermarkStatus
from yarnflink.taskexecutor.checkpoints import SubtaskCheckpointCoordinator


class EndOfChannel:
    """Sent on every output partition before a checkpointing task ends its input: the consumer's
    barrier handler stops waiting for barriers from that channel."""

    def __reduce__(self) -> Any:
        return (EndOfChannel, ())


class StreamTaskNetworkInput:
    """Elements of the input gate into the chain."""

    def __init__(self, num_channels: int, chain: OperatorChain, io_metrics: TaskIOMetrics, streaming: bool) -> None:
        self.chain = chain
        self.io_metrics = io_metrics
        self.streaming = streaming
        self.valve = StatusWatermarkValve(num_channels)

    def process(self, item: BufferOrEvent) -> None:
        """A batch goes into the chain; a watermark or a watermark status goes through the
        valve, and what comes out of it into the chain."""
        if item.batch is not None:
            self.io_metrics.count_in(item.batch)
            self.chain.push(Batch.from_arrow(item.batch))
            return
        event = item.event
        if not self.streaming:
            return  # BATCH: event time ends with the input, as Flink ignores watermarks in batch mode
        if isinstance(event, Watermark):
            out = self.valve.input_watermark(item.channel, event)
        elif isinstance(event, WatermarkStatus):
            out = self.valve.input_watermark_status(item.channel, event)
        else:
            return
        for element in out:
            if isinstance(element, Watermark):
                self.io_metrics.current_input_watermark = element.timestamp
            self.chain.process_watermark(element)


BarrierHandler = AlignedBarrierHandler | BarrierTracker | UnalignedBarrierHandler


class CheckpointedInput:
    """The barrier handler between the input gate and ``StreamTaskNetworkInput``.

    ``checkpoint_on_barrier(barrier, unaligned)`` takes the checkpoint every channel's barrier
    asked for (the task also runs its stop-with-savepoint bookkeeping there)."""

    def __init__(
        self,
        handler: BarrierHandler,
        network_input: StreamTaskNetworkInput,
        checkpoints: SubtaskCheckpointCoordinator,
        checkpoint_on_barrier: Callable[[CheckpointBarrier, bool], None],
    ) -> None:
        self.handler = handler
        self.network_input = network_input
        self.checkpoints = checkpoints
        self.checkpoint_on_barrier = checkpoint_on_barrier
        self._unaligned = isinstance(handler, UnalignedBarrierHandler)

    def process(self, item: BufferOrEvent) -> None:
        handler = self.handler
        event = item.event
        if isinstance(event, CheckpointBarrier):
            self.checkpoints.on_barrier_received(event.checkpoint_id)
            actions = handler.on_barrier(item.channel, event)
        elif isinstance(event, CancelCheckpointMarker):
            actions = handler.on_cancel_marker(item.channel, event)
        elif isinstance(event, EndOfChannel):
            actions = [] if item.channel in handler.ended else handler.on_end_of_partition(item.channel)
        elif isinstance(handler, UnalignedBarrierHandler):
            actions = handler.on_buffer(item.channel, item, item.batch is not None)
        else:
            actions = handler.on_buffer(item.channel, item)
        self._handle(actions)

    def end_of_input(self, num_channels: int) -> None:
        """Every channel ended: release what alignment still holds."""
        for ch in range(num_channels):
            if ch not in self.handler.ended:
                self._handle(self.handler.on_end_of_partition(ch))

    def _handle(self, actions: list) -> None:
        for a in actions:
            if isinstance(a, ProcessBuffer):
                self.network_input.process(a.item)
            elif isinstance(a, TriggerCheckpointOnBarrier):
                # a savepoint is aligned even with unaligned checkpoints: no channel state
                self.checkpoint_on_barrier(a.barrier, self._unaligned and not a.barrier.is_savepoint)
            elif isinstance(a, ChannelStateComplete):
                self.checkpoints.channel_state.write(a)
            elif isinstance(a, AbortCheckpointOnBarrier):
                self.checkpoints.abort_on_barrier(a.checkpoint_id, a.reason)
