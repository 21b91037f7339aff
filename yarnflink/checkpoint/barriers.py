"""Checkpoint barriers and their handling at a task's input (pure logic).

Barriers (and cancellation markers) travel in the data streams as events
(``ResultPartition.emit_event``). A task with several input channels feeds each element of its
input gate into a handler, which answers with actions:

* ``ProcessBuffer(channel, item)`` -- hand the item (a batch, a watermark, any non-barrier
  event) to the operator chain now;
* ``TriggerCheckpointOnBarrier(barrier)`` -- snapshot the chain's state, then forward the barrier
  downstream (``OperatorChain`` outputs);
* ``AbortCheckpointOnBarrier(checkpoint_id, reason)`` -- decline the checkpoint to the
  coordinator and forward a ``CancelCheckpointMarker``.

Two variants (``execution.checkpointing.mode``):

* ``AlignedBarrierHandler`` (EXACTLY_ONCE): once the first barrier of checkpoint n arrives, the
  channels that delivered it are blocked; their items are held back (in arrival order) until
  every live channel has delivered barrier n, then the snapshot is triggered and the held items
  are released. The snapshot thus reflects exactly the records before barrier n on every channel.
  A barrier of a newer checkpoint or a cancellation marker aborts the alignment in progress.
* ``BarrierTracker`` (AT_LEAST_ONCE, no alignment): nothing is ever blocked; the snapshot is
  triggered when barrier n has arrived on every live channel. Records after the barrier on a fast
  channel may be in the snapshot, so replay after recovery can duplicate them.

* ``UnalignedBarrierHandler`` (EXACTLY_ONCE with ``execution.checkpointing.unaligned.enabled``):
  the FIRST barrier of checkpoint n triggers the snapshot (the task forwards the barrier at once)
  and nothing is ever blocked. Items that arrive afterwards on channels whose barrier n is still
  missing are processed AND recorded as that channel's in-flight data; a channel's barrier stops
  its recording. Once every live channel delivered barrier n, ``ChannelStateComplete`` hands the
  recordings to the task (persisted with the snapshot, replayed on restore). A newer barrier, a
  cancellation marker or ``abort`` discards an incomplete recording.
  A SAVEPOINT barrier (``is_savepoint``) is handled aligned even here, as in Flink: its channels
  are blocked and their items held until every live channel delivered it, then the snapshot is
  triggered; nothing is recorded (a savepoint carries no in-flight data, so it stays relocatable
  and rescalable). The next normal checkpoint is unaligned again.

An ended channel (end of partition) no longer takes part: it will deliver nothing more.

``StopWithSavepointLatch`` is a task's side of stop-with-savepoint (FLIP-34): once the task took
the snapshot of a synchronous savepoint it processes nothing (a source emits no record, no
processing-time timer fires) until the savepoint's completion (the task finishes without ending
its operators' input) or its abort (the task goes on as before).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Union

EXACTLY_ONCE = "EXACTLY_ONCE"
AT_LEAST_ONCE = "AT_LEAST_ONCE"


# ----------------------------------------------------------------------------- events in streams
@dataclass(frozen=True)
class CheckpointBarrier:
    """``synchronous``: the barrier of a stop-with-savepoint (Flink's SavepointType SUSPEND, or
    TERMINATE with ``drain``): every task that snapshots it emits nothing more until the savepoint
    completed (then it finishes) or was aborted (then it goes on); see ``StopWithSavepointLatch``."""

    checkpoint_id: int
    timestamp: int
    is_savepoint: bool = False
    synchronous: bool = False
    drain: bool = False


@dataclass(frozen=True)
class CancelCheckpointMarker:
    checkpoint_id: int


# ----------------------------------------------------------------------------- actions
@dataclass(frozen=True)
class ProcessBuffer:
    channel: int
    item: Any


@dataclass(frozen=True)
class TriggerCheckpointOnBarrier:
    barrier: CheckpointBarrier


@dataclass(frozen=True)
class AbortCheckpointOnBarrier:
    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class ChannelStateComplete:
    """Unaligned: every live channel delivered barrier ``checkpoint_id``; ``recorded`` maps a
    channel to the items it delivered between the snapshot and its own barrier (in order;
    channels with nothing recorded are absent)."""

    checkpoint_id: int
    recorded: dict[int, list[Any]]


HandlerAction = Union[ProcessBuffer, TriggerCheckpointOnBarrier, AbortCheckpointOnBarrier, ChannelStateComplete]

# abort reasons (Flink's CheckpointFailureReason names)
SUBSUMED_BY_NEWER = "CHECKPOINT_DECLINED_SUBSUMED"
CANCELLED_ON_BARRIER = "CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER"


class _Base:
    def __init__(self, num_channels: int):
        if num_channels < 1:
            raise ValueError(f"a barrier handler needs at least one channel, got {num_channels}")
        self.num_channels = num_channels
        self.ended: set[int] = set()
        self.latest_triggered = 0  # highest checkpoint id triggered or aborted here

    def _check(self, channel: int) -> None:
        if not 0 <= channel < self.num_channels:
            raise ValueError(f"channel {channel} out of range (0..{self.num_channels - 1})")

    def _live(self) -> set[int]:
        return set(range(self.num_channels)) - self.ended


class AlignedBarrierHandler(_Base):
    """EXACTLY_ONCE: aligned barriers (see module doc)."""

    def __init__(self, num_channels: int):
        super().__init__(num_channels)
        self.current: int = 0  # checkpoint being aligned (0: none)
        self.current_barrier: CheckpointBarrier | None = None
        self.blocked: set[int] = set()
        self._held: deque[tuple[int, Any]] = deque()

    @property
    def is_aligning(self) -> bool:
        return self.current != 0

    def on_buffer(self, channel: int, item: Any) -> list[HandlerAction]:
        self._check(channel)
        if channel in self.blocked:
            self._held.append((channel, item))
            return []
        return [ProcessBuffer(channel, item)]

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> list[HandlerAction]:
        self._check(channel)
        n = barrier.checkpoint_id
        if channel in self.blocked:
            # a channel delivers its barriers in order: a second barrier while blocked is newer
            self._held.append((channel, barrier))
            return []
        if (n <= self.latest_triggered and n != self.current) or n < self.current:
            return []  # an old checkpoint (already triggered or aborted here)
        actions: list[HandlerAction] = []
        while self.current and n > self.current:
            actions += self._abort(
                SUBSUMED_BY_NEWER, f"barrier of checkpoint {n} arrived before checkpoint {self.current} was aligned"
            )
            actions += self._drain_released()  # may start aligning n already (held barriers)
        if not self.current:
            self.current = n
            self.current_barrier = barrier
        self.blocked.add(channel)
        return actions + self._maybe_complete()

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> list[HandlerAction]:
        self._check(channel)
        n = marker.checkpoint_id
        if channel in self.blocked:
            self._held.append((channel, marker))
            return []
        if n == self.current:
            return self._abort(CANCELLED_ON_BARRIER, f"checkpoint {n} was cancelled upstream") + self._drain_released()
        if n > self.latest_triggered:
            actions: list[HandlerAction] = []
            if self.current:
                actions += self._abort(
                    SUBSUMED_BY_NEWER, f"checkpoint {n} was cancelled before {self.current} was aligned"
                )
            self.latest_triggered = n
            actions.append(
                AbortCheckpointOnBarrier(n, f"{CANCELLED_ON_BARRIER}: checkpoint {n} was cancelled upstream")
            )
            return actions + self._drain_released()
        return []

    def on_end_of_partition(self, channel: int) -> list[HandlerAction]:
        self._check(channel)
        self.ended.add(channel)
        if self.current:
            return self._maybe_complete()
        return []

    # ------------------------------------------------------------------ internals
    def _maybe_complete(self) -> list[HandlerAction]:
        if not self.current or not self._live() <= self.blocked:
            return []
        barrier = self.current_barrier
        assert barrier is not None
        self.latest_triggered = max(self.latest_triggered, self.current)
        self.current = 0
        self.current_barrier = None
        self.blocked.clear()
        return [TriggerCheckpointOnBarrier(barrier)] + self._drain_released()

    def _abort(self, reason: str, message: str) -> list[HandlerAction]:
        n = self.current
        self.latest_triggered = max(self.latest_triggered, n)
        self.current = 0
        self.current_barrier = None
        self.blocked.clear()
        return [AbortCheckpointOnBarrier(n, f"{reason}: {message}")]

    def _drain_released(self) -> list[HandlerAction]:
        """Replay held items (in arrival order) now that no channel is blocked; a held barrier
        may start a new alignment, after which later items of its channel are held again."""
        actions: list[HandlerAction] = []
        held, self._held = self._held, deque()
        while held:
            channel, item = held.popleft()
            if isinstance(item, CheckpointBarrier):
                actions += self.on_barrier(channel, item)
            elif isinstance(item, CancelCheckpointMarker):
                actions += self.on_cancel_marker(channel, item)
            else:
                actions += self.on_buffer(channel, item)
        return actions

    @property
    def held_items(self) -> int:
        return len(self._held)


class BarrierTracker(_Base):
    """AT_LEAST_ONCE: counts barriers, never blocks (Flink's CheckpointBarrierTracker)."""

    def __init__(self, num_channels: int):
        super().__init__(num_channels)
        self._seen: dict[int, tuple[CheckpointBarrier, set[int]]] = {}  # pending checkpoints

    blocked: frozenset[int] = frozenset()

    def on_buffer(self, channel: int, item: Any) -> list[HandlerAction]:
        self._check(channel)
        return [ProcessBuffer(channel, item)]

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> list[HandlerAction]:
        self._check(channel)
        n = barrier.checkpoint_id
        if n <= self.latest_triggered:
            return []
        entry = self._seen.setdefault(n, (barrier, set()))
        entry[1].add(channel)
        return self._complete_ready()

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> list[HandlerAction]:
        self._check(channel)
        n = marker.checkpoint_id
        if n <= self.latest_triggered:
            return []
        actions: list[HandlerAction] = []
        for older in sorted(k for k in self._seen if k < n):
            del self._seen[older]
            actions.append(AbortCheckpointOnBarrier(older, f"{SUBSUMED_BY_NEWER}: checkpoint {n} was cancelled"))
        self._seen.pop(n, None)
        self.latest_triggered = n
        actions.append(AbortCheckpointOnBarrier(n, f"{CANCELLED_ON_BARRIER}: checkpoint {n} was cancelled upstream"))
        return actions

    def on_end_of_partition(self, channel: int) -> list[HandlerAction]:
        self._check(channel)
        self.ended.add(channel)
        return self._complete_ready()

    def _complete_ready(self) -> list[HandlerAction]:
        live = self._live()
        actions: list[HandlerAction] = []
        for n in sorted(self._seen):
            barrier, channels = self._seen[n]
            if live <= channels:
                for older in sorted(k for k in self._seen if k < n):
                    del self._seen[older]
                    actions.append(
                        AbortCheckpointOnBarrier(older, f"{SUBSUMED_BY_NEWER}: checkpoint {n} completed first")
                    )
                del self._seen[n]
                self.latest_triggered = n
                actions.append(TriggerCheckpointOnBarrier(barrier))
                break
        if actions and any(live <= ch for _, ch in self._seen.values()):
            actions += self._complete_ready()
        return actions


class UnalignedBarrierHandler(_Base):
    """EXACTLY_ONCE, unaligned (Flink's ``SingleCheckpointBarrierHandler`` in unaligned mode):
    see module doc. ``on_buffer(..., persist=False)`` processes an item without recording it
    (watermarks and statuses: upstream sends them again after a restore). Savepoint barriers are
    aligned (``aligning``, ``blocked``, held items) and record nothing."""

    def __init__(self, num_channels: int):
        super().__init__(num_channels)
        self.current: int = 0  # checkpoint whose channel state is being recorded (0: none)
        self.pending: set[int] = set()  # live channels whose barrier ``current`` is missing
        self.recorded: dict[int, list[Any]] = {}
        self.aligning: CheckpointBarrier | None = None  # savepoint barrier being aligned
        self.blocked: set[int] = set()  # channels that delivered ``aligning``
        self._held: deque[tuple[int, Any, bool]] = deque()

    @property
    def is_recording(self) -> bool:
        return self.current != 0

    @property
    def is_aligning(self) -> bool:
        return self.aligning is not None

    @property
    def held_items(self) -> int:
        return len(self._held)

    def on_buffer(self, channel: int, item: Any, persist: bool = True) -> list[HandlerAction]:
        self._check(channel)
        if channel in self.blocked:
            self._held.append((channel, item, persist))
            return []
        if persist and self.current and channel in self.pending:
            self.recorded.setdefault(channel, []).append(item)
        return [ProcessBuffer(channel, item)]

    def on_barrier(self, channel: int, barrier: CheckpointBarrier) -> list[HandlerAction]:
        self._check(channel)
        if channel in self.blocked:
            # a channel delivers its barriers in order: a second barrier while blocked is newer
            self._held.append((channel, barrier, True))
            return []
        n = barrier.checkpoint_id
        if self.aligning is not None and n == self.aligning.checkpoint_id:
            self.blocked.add(channel)
            return self._maybe_complete_aligned()
        if n == self.current:
            self.pending.discard(channel)
            return self._maybe_complete()
        if n <= self.latest_triggered:
            return []  # old (already triggered or aborted here)
        if self.aligning is not None:
            if n < self.aligning.checkpoint_id:
                return []  # older than the savepoint being aligned
            aborted = self._abort_aligning(
                SUBSUMED_BY_NEWER,
                f"barrier of checkpoint {n} arrived before savepoint {self.aligning.checkpoint_id} was aligned",
            )
            aborted += self._drain_released()  # may start aligning/recording already
            return aborted + self.on_barrier(channel, barrier)
        actions: list[HandlerAction] = []
        if self.current:
            actions += self._abort(
                SUBSUMED_BY_NEWER,
                f"barrier of checkpoint {n} arrived before checkpoint {self.current} had all its barriers",
            )
        if barrier.is_savepoint:
            self.aligning = barrier
            self.blocked = {channel}
            return actions + self._maybe_complete_aligned()
        self.current = n
        self.latest_triggered = n
        self.pending = self._live() - {channel}
        self.recorded = {}
        actions.append(TriggerCheckpointOnBarrier(barrier))
        return actions + self._maybe_complete()

    def on_cancel_marker(self, channel: int, marker: CancelCheckpointMarker) -> list[HandlerAction]:
        self._check(channel)
        if channel in self.blocked:
            self._held.append((channel, marker, True))
            return []
        n = marker.checkpoint_id
        if self.aligning is not None:
            if n == self.aligning.checkpoint_id:
                return (
                    self._abort_aligning(CANCELLED_ON_BARRIER, f"savepoint {n} was cancelled upstream")
                    + self._drain_released()
                )
            if n < self.aligning.checkpoint_id:
                return []
        if n == self.current:
            return self._abort(CANCELLED_ON_BARRIER, f"checkpoint {n} was cancelled upstream")
        if n > self.latest_triggered:
            actions: list[HandlerAction] = []
            if self.aligning is not None:
                actions += self._abort_aligning(
                    SUBSUMED_BY_NEWER,
                    f"checkpoint {n} was cancelled before savepoint {self.aligning.checkpoint_id} was aligned",
                )
            if self.current:
                actions += self._abort(
                    SUBSUMED_BY_NEWER, f"checkpoint {n} was cancelled before {self.current} completed"
                )
            self.latest_triggered = max(self.latest_triggered, n)
            actions.append(
                AbortCheckpointOnBarrier(n, f"{CANCELLED_ON_BARRIER}: checkpoint {n} was cancelled upstream")
            )
            return actions + self._drain_released()
        return []

    def on_end_of_partition(self, channel: int) -> list[HandlerAction]:
        self._check(channel)
        self.ended.add(channel)
        self.pending.discard(channel)  # what it recorded stays: it was all before the barrier
        if self.aligning is not None:
            return self._maybe_complete_aligned()
        return self._maybe_complete()

    def abort(self, checkpoint_id: int) -> bool:
        """The coordinator aborted checkpoint ``checkpoint_id`` (or the task is cancelled): an
        incomplete recording of it (or of an older one) is discarded. True if one was. (A savepoint
        being aligned goes on aligning, as ``AlignedBarrierHandler`` does: its held items must be
        released through the handler's actions.)"""
        self.latest_triggered = max(self.latest_triggered, checkpoint_id)
        if self.current and self.current <= checkpoint_id:
            self._reset()
            return True
        return False

    def _reset(self) -> None:
        self.current = 0
        self.pending = set()
        self.recorded = {}

    def _abort(self, reason: str, message: str) -> list[HandlerAction]:
        n = self.current
        self._reset()
        return [AbortCheckpointOnBarrier(n, f"{reason}: {message}")]

    def _maybe_complete(self) -> list[HandlerAction]:
        if not self.current or self.pending:
            return []
        done = ChannelStateComplete(self.current, self.recorded)
        self._reset()
        return [done]

    # ------------------------------------------------------------------ aligned savepoints
    def _maybe_complete_aligned(self) -> list[HandlerAction]:
        barrier = self.aligning
        if barrier is None or not self._live() <= self.blocked:
            return []
        self.latest_triggered = max(self.latest_triggered, barrier.checkpoint_id)
        self.aligning = None
        self.blocked = set()
        return [TriggerCheckpointOnBarrier(barrier)] + self._drain_released()

    def _abort_aligning(self, reason: str, message: str) -> list[HandlerAction]:
        assert self.aligning is not None
        n = self.aligning.checkpoint_id
        self.latest_triggered = max(self.latest_triggered, n)
        self.aligning = None
        self.blocked = set()
        return [AbortCheckpointOnBarrier(n, f"{reason}: {message}")]

    def _drain_released(self) -> list[HandlerAction]:
        """Replay held items (in arrival order) now that no channel is blocked; a held barrier
        may start a new alignment, after which later items of its channel are held again."""
        actions: list[HandlerAction] = []
        held, self._held = self._held, deque()
        while held:
            channel, item, persist = held.popleft()
            if isinstance(item, CheckpointBarrier):
                actions += self.on_barrier(channel, item)
            elif isinstance(item, CancelCheckpointMarker):
                actions += self.on_cancel_marker(channel, item)
            else:
                actions += self.on_buffer(channel, item, persist)
        return actions


def create_barrier_handler(
    mode: str, num_channels: int, unaligned: bool = False
) -> AlignedBarrierHandler | BarrierTracker | UnalignedBarrierHandler:
    """The handler for ``execution.checkpointing.mode`` (and ``.unaligned.enabled``, which only
    applies to EXACTLY_ONCE, as in Flink)."""
    if mode == EXACTLY_ONCE:
        return UnalignedBarrierHandler(num_channels) if unaligned else AlignedBarrierHandler(num_channels)
    if mode == AT_LEAST_ONCE:
        return BarrierTracker(num_channels)
    raise ValueError(f"unknown checkpointing mode {mode!r}; expected {EXACTLY_ONCE} or {AT_LEAST_ONCE}")


# ----------------------------------------------------------------------------- stop-with-savepoint
@dataclass(frozen=True)
class AdvanceToEndOfEventTime:
    """``--drain`` (TERMINATE), at a task the savepoint is triggered at (a source): emit
    ``MAX_WATERMARK`` before the snapshot, so every event-time timer and window fires into it."""

    checkpoint_id: int


@dataclass(frozen=True)
class FinishTask:
    """The synchronous savepoint completed: the task ends its outputs and finishes, without
    ending its operators' input (no end-of-input output, no ``MAX_WATERMARK``)."""

    checkpoint_id: int


@dataclass(frozen=True)
class ResumeProcessing:
    """The synchronous savepoint was aborted (declined, expired, not written): go on as before."""

    checkpoint_id: int


StopAction = Union[AdvanceToEndOfEventTime, FinishTask, ResumeProcessing]

IDLE, SUSPENDED, FINISHING = "IDLE", "SUSPENDED", "FINISHING"


class StopWithSavepointLatch:
    """A task's stop-with-savepoint as pure logic (Flink's ``SynchronousSavepointLatch``):

    * ``on_trigger`` (a task the JobMaster triggers: a source) before the snapshot: with
      ``drain``, ``AdvanceToEndOfEventTime``;
    * ``on_snapshot_taken`` after the barrier went out: SUSPENDED (``is_suspended``: no records,
      no processing time);
    * ``on_checkpoint_complete`` of that savepoint: FINISHING and ``FinishTask``;
      ``on_checkpoint_aborted`` of it: IDLE again and ``ResumeProcessing``.

    A trigger or barrier of a synchronous savepoint already aborted here (an abort can overtake a
    trigger) suspends nothing. Other checkpoints' notifications change nothing.
    """

    def __init__(self) -> None:
        self.state = IDLE
        self.checkpoint_id = 0  # the synchronous savepoint the task is suspended for or finishing at
        self._aborted_up_to = 0  # highest checkpoint id whose abort arrived here

    @property
    def is_suspended(self) -> bool:
        return self.state == SUSPENDED

    @property
    def is_finishing(self) -> bool:
        return self.state == FINISHING

    @property
    def processing_suspended(self) -> bool:
        """No record from a source, no processing time, no new checkpoint: after the snapshot of a
        synchronous savepoint (until its abort) and while finishing after its completion."""
        return self.state != IDLE

    def _applies(self, checkpoint_id: int, synchronous: bool) -> bool:
        return synchronous and self.state == IDLE and checkpoint_id > self._aborted_up_to

    def on_trigger(self, checkpoint_id: int, synchronous: bool, drain: bool) -> list[StopAction]:
        if drain and self._applies(checkpoint_id, synchronous):
            return [AdvanceToEndOfEventTime(checkpoint_id)]
        return []

    def on_snapshot_taken(self, checkpoint_id: int, synchronous: bool) -> list[StopAction]:
        if self._applies(checkpoint_id, synchronous):
            self.state = SUSPENDED
            self.checkpoint_id = checkpoint_id
        return []

    def on_checkpoint_complete(self, checkpoint_id: int) -> list[StopAction]:
        if self.state == SUSPENDED and checkpoint_id == self.checkpoint_id:
            self.state = FINISHING
            return [FinishTask(checkpoint_id)]
        return []

    def on_checkpoint_aborted(self, checkpoint_id: int) -> list[StopAction]:
        self._aborted_up_to = max(self._aborted_up_to, checkpoint_id)
        if self.state == SUSPENDED and checkpoint_id == self.checkpoint_id:
            self.state = IDLE
            return [ResumeProcessing(checkpoint_id)]
        return []
