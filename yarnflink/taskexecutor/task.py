"""Task: one parallel instance of a JobVertex (an operator chain), run in its own thread.

restore -> invoke (seed 003): the thread builds the chain from the deployment descriptor, creates
its result partitions and input gate, then pushes batches through the chain until its input ends
or it is cancelled. State changes go to the TaskExecutor's loop through ``report``.

Stop-with-savepoint (FLIP-34, ``docs/SAVEPOINTS.md``): a task that snapshots a synchronous
savepoint is suspended (``StopWithSavepointLatch``): a source emits no record and no
processing-time callback runs until the savepoint's completion notification (its sinks commit,
then the task ends its outputs without ``MAX_WATERMARK`` and finishes without ending its
operators' input, so nothing is emitted after the savepoint) or its abort (the task goes on).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Empty, SimpleQueue
from typing import Any

import cloudpickle

from yarnflink.checkpoint.barriers import (
    AbortCheckpointOnBarrier,
    AdvanceToEndOfEventTime,
    CancelCheckpointMarker,
    ChannelStateComplete,
    CheckpointBarrier,
    ProcessBuffer,
    ResumeProcessing,
    StopWithSavepointLatch,
    TriggerCheckpointOnBarrier,
    UnalignedBarrierHandler,
    create_barrier_handler,
)
from yarnflink.common.records import Batch
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.jobmaster.gateway import CheckpointMetrics, SerializedThrowable
from yarnflink.metrics.task import TaskIOMetrics
from yarnflink.network import (
    BlockingResultPartition,
    InputChannelSpec,
    InputGate,
    PartitionException,
    ResultPartition,
    ShuffleEnvironment,
)
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.partitioners import NetworkOutput
from yarnflink.operators.watermarks import MAX_WATERMARK, StatusWatermarkValve, Watermark, WatermarkStatus
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.taskexecutor.checkpoint_responder import CheckpointResponder, NoCheckpointResponder
from yarnflink.taskexecutor.gateway import TaskDeploymentDescriptor

log = logging.getLogger(__name__)

StateReporter = Callable[["Task", ExecutionState, SerializedThrowable | None], None]


class TaskCancelled(Exception):
    pass


class EndOfChannel:
    """Sent on every output partition before a checkpointing task ends its input: the consumer's
    barrier handler stops waiting for barriers from that channel."""

    def __reduce__(self) -> Any:
        return (EndOfChannel, ())


#: acknowledgements and declines go to the JobMaster off the task threads
_ACKS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="checkpoint-ack")
#: input channel state of unaligned checkpoints is written off the task threads
_CHANNEL_WRITES = ThreadPoolExecutor(max_workers=2, thread_name_prefix="channel-state")
#: how often a waiting task looks for checkpoint triggers and notifications (s)
CHECKPOINT_POLL_S = 0.05


def _now_ms() -> int:
    return int(time.time() * 1000)


def checkpointing_enabled(config: dict, runtime_mode: str) -> bool:
    """Periodic checkpoints run in STREAMING jobs with ``execution.checkpointing.interval`` set."""
    interval = (config.get("execution.checkpointing.interval") or "").strip()
    return bool(interval) and interval not in ("0", "0 ms", "0ms") and (runtime_mode or "STREAMING") == "STREAMING"


class Task:
    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        shuffle: ShuffleEnvironment,
        report: StateReporter,
        send_to_coordinator: Callable[[str, bytes], None],
        buffer_timeout_s: float = 0.1,
        checkpoint_responder: CheckpointResponder | None = None,
    ) -> None:
        self.tdd = tdd
        self.execution_id = tdd.execution_id
        self.job_id = tdd.job_id
        self.name = f"{tdd.task_name} ({tdd.subtask_index + 1}/{tdd.parallelism})"
        self.shuffle = shuffle
        self._report = report
        self._send = send_to_coordinator
        self._responder: CheckpointResponder = checkpoint_responder or NoCheckpointResponder()
        self._buffer_timeout_s = buffer_timeout_s
        self.state = ExecutionState.DEPLOYING
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"Task {self.name}", daemon=True)
        self.partitions: list[ResultPartition | BlockingResultPartition] = []
        #: set when the task failed reading an upstream partition (reported to the JobMaster)
        self.failed_partition_id = ""
        self.gate: InputGate | None = None
        self._valve: StatusWatermarkValve | None = None
        self._streaming = (tdd.runtime_mode or "STREAMING") == "STREAMING"
        self._outputs: list[NetworkOutput] = []
        self.io_metrics = TaskIOMetrics()  # read by the TaskExecutor (metrics, final IOMetrics)
        # checkpoints (see docs/STATE_AND_EVENT_TIME.md): triggers and notifications arrive on the
        # TaskExecutor's loop and are carried out by the task thread between batches
        config = dict(tdd.job_config)
        self.checkpointing = checkpointing_enabled(config, tdd.runtime_mode)
        #: (checkpoint id, timestamp, is savepoint, synchronous, drain)
        self._checkpoint_requests: SimpleQueue[tuple[int, int, bool, bool, bool]] = SimpleQueue()
        self._notifications: SimpleQueue[tuple[int, bool]] = SimpleQueue()
        self._storage: Any = None
        self._barrier_handler: Any = None
        self._last_checkpoint = 0
        #: checkpoint id -> (monotonic s, wall ms) of its first barrier here (alignment, start delay)
        self._first_barrier: dict[int, tuple[float, int]] = {}
        # unaligned checkpoints: checkpoint id -> (future of the input channel state handles,
        # the checkpoint's state-file factory) between the snapshot and the last barrier
        self._unaligned = str(config.get("execution.checkpointing.unaligned.enabled") or "").strip().lower() in (
            "true",
            "1",
            "yes",
        )
        self._channel_state: dict[int, tuple[Future, Any]] = {}
        self._restored: TaskStateSnapshot | None = None
        #: stop-with-savepoint: suspended after a synchronous savepoint's snapshot, then finishing
        self._stop = StopWithSavepointLatch()

    def trigger_checkpoint(
        self,
        checkpoint_id: int,
        timestamp: int,
        is_savepoint: bool = False,
        synchronous: bool = False,
        drain: bool = False,
    ) -> None:
        """From any thread: a source (or a task whose inputs all ended) starts checkpoint n
        (``synchronous``: the savepoint of a stop-with-savepoint, ``drain``: MAX_WATERMARK first)."""
        self._checkpoint_requests.put((checkpoint_id, timestamp, is_savepoint, synchronous, drain))

    def notify_checkpoint(self, checkpoint_id: int, completed: bool) -> None:
        """From any thread: checkpoint n completed (or was aborted)."""
        self._notifications.put((checkpoint_id, completed))

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def cancel(self) -> None:
        """From any thread: stops the task; blocked reads and writes are released."""
        self._cancelled.set()
        if self.gate is not None:
            self.gate.close()
        for p in self.partitions:
            p.release()

    # ------------------------------------------------------------------ the task thread
    def _set_state(self, state: ExecutionState, error: SerializedThrowable | None = None) -> None:
        self.state = state
        self._report(self, state, error)

    def _run(self) -> None:
        chain: OperatorChain | None = None
        try:
            self._set_state(ExecutionState.INITIALIZING)
            chain = self._restore()
            self._check_cancelled()
            self._set_state(ExecutionState.RUNNING)
            self._invoke(chain)
            chain.close()
            chain = None
            self._set_state(ExecutionState.FINISHED)
        except BaseException as e:  # noqa: BLE001 - every failure of user code ends here
            if chain is not None:
                try:
                    self._notify_completed(chain)  # cancel-with-savepoint: its sinks commit first
                    chain.close()
                except Exception:  # noqa: BLE001
                    log.debug("close after failure failed", exc_info=True)
            if self._cancelled.is_set():
                for p in self.partitions:
                    p.release()
                self._set_state(ExecutionState.CANCELED)
            else:
                log.info("task %s failed: %s", self.name, e)
                if isinstance(e, PartitionException) and e.partition_id:
                    self.failed_partition_id = e.partition_id  # the JobMaster restarts its producer
                # report before failing the partitions: consumers that fail because of it report
                # after this task, so the JobMaster sees the root cause first
                self._set_state(ExecutionState.FAILED, SerializedThrowable.of(e))
                for p in self.partitions:
                    p.fail(e)
        finally:
            if self.gate is not None:
                self.gate.close()

    def _notify_completed(self, chain: OperatorChain) -> None:
        """Completed-checkpoint notifications that arrived before the task ended (cancelled, or
        failed because an upstream task was cancelled) are delivered: a completed checkpoint's
        sink commits are always safe, and the JobMaster cancels a job (cancel-with-savepoint)
        only after notifying it of the savepoint."""
        from yarnflink.state.task_state import notify_chain

        while True:
            try:
                cid, completed = self._notifications.get_nowait()
            except Empty:
                return
            if completed:
                notify_chain(chain, cid, True)

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise TaskCancelled(self.name)

    def _restore(self) -> OperatorChain:
        tdd = self.tdd
        outputs: dict[str, NetworkOutput] = {}
        for rp in tdd.produced_partitions:
            partition = self.shuffle.create_result_partition(
                rp.partition_id, rp.num_subpartitions, blocking=rp.result_type == "BLOCKING"
            )
            self.partitions.append(partition)
            key_selector = cloudpickle.loads(rp.key_selector) if rp.key_selector else None
            streaming = (tdd.runtime_mode or "STREAMING") == "STREAMING" and rp.result_type != "BLOCKING"
            out = NetworkOutput(
                partition,
                rp.partitioning,
                rp.num_subpartitions,
                key_selector,
                tdd.max_parallelism,
                tdd.subtask_index,
                buffer_timeout_s=self._buffer_timeout_s,
                end_watermark=streaming,
            )
            outputs[rp.dataset_id] = out
            self._outputs.append(out)
            self.io_metrics.register_output(out, partition)
        config = dict(tdd.job_config)

        def ctx_factory(operator_name: str) -> OperatorContext:
            return OperatorContext(
                task_name=self.name,
                operator_name=operator_name,
                subtask_index=tdd.subtask_index,
                parallelism=tdd.parallelism,
                max_parallelism=tdd.max_parallelism,
                attempt_number=tdd.attempt_number,
                job_id=tdd.job_id,
                runtime_mode=tdd.runtime_mode or "STREAMING",
                config=config,
                send_to_coordinator=self._send,
                is_running=lambda: not self._cancelled.is_set(),
            )

        state_manager = self._state_manager(config) if (self.checkpointing or tdd.task_state) else None
        if state_manager is not None:
            plain_factory = ctx_factory

            def ctx_factory(operator_name: str) -> OperatorContext:  # noqa: F811 - with state
                ctx = plain_factory(operator_name)
                ctx.state = state_manager
                return ctx

        chain = OperatorChain(list(tdd.operators), outputs, ctx_factory)
        chain.open()
        # inputs are requested once the operators are open (as Flink's StreamTask does), so a
        # task still opening holds no upstream connection yet
        channels = [
            InputChannelSpec(c.partition_id, c.subpartition, c.producer_data_address)
            for g in tdd.input_gates
            for c in g.channels
        ]
        if channels:
            self._check_cancelled()
            self.gate = self.shuffle.create_input_gate(channels)
        return chain

    def _invoke(self, chain: OperatorChain) -> None:
        if chain.is_source:
            for batch in chain.source_batches():
                self._check_cancelled()
                chain.push(batch)
                self._processing_time(chain)
                chain.flush_if_due()
                if self.checkpointing:
                    self._poll_checkpoints(chain)
                    self._await_stop_outcome(chain)  # stop-with-savepoint: no record after its barrier
                    if self._stop.is_finishing:
                        break
        else:
            assert self.gate is not None, "a task without a source operator reads an input gate"
            # watermarks and idle/active statuses of the input channels, combined (Flink's
            # StatusWatermarkValve); an ended upstream sends MAX_WATERMARK before it ends
            self._valve = StatusWatermarkValve(self.gate.num_channels)
            handler = None
            if self.checkpointing:
                mode = str(self.tdd.job_config.get("execution.checkpointing.mode") or "EXACTLY_ONCE").upper()
                handler = self._barrier_handler = create_barrier_handler(
                    mode, self.gate.num_channels, unaligned=self._unaligned
                )
            self._replay_channel_state(chain)
            while True:
                if handler is not None:
                    self._poll_checkpoints(chain)
                # wait for input at most until buffered output is due (execution.buffer-timeout)
                # or an operator's processing time is (timers, idleness); neither while a stop's
                # savepoint suspends processing
                suspended = self._stop.processing_suspended
                deadline = None if suspended else chain.next_flush_deadline()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                pt = None if suspended else chain.next_processing_time()
                if pt is not None:
                    wait = max(0.0, (pt - _now_ms()) / 1000.0)
                    timeout = wait if timeout is None else min(timeout, wait)
                if handler is not None:
                    timeout = CHECKPOINT_POLL_S if timeout is None else min(timeout, CHECKPOINT_POLL_S)
                try:
                    item = self.gate.next(timeout)
                except TimeoutError:
                    if not self._stop.processing_suspended:  # nothing may fire after a stop's savepoint
                        self._processing_time(chain)
                        chain.flush_if_due()
                    continue
                if item is None:
                    break
                if handler is None:
                    self._process_input(chain, item)
                else:
                    event = item.event
                    if isinstance(event, CheckpointBarrier):
                        self._first_barrier.setdefault(event.checkpoint_id, (time.monotonic(), _now_ms()))
                        actions = handler.on_barrier(item.channel, event)
                    elif isinstance(event, CancelCheckpointMarker):
                        actions = handler.on_cancel_marker(item.channel, event)
                    elif isinstance(event, EndOfChannel):
                        actions = [] if item.channel in handler.ended else handler.on_end_of_partition(item.channel)
                    elif isinstance(handler, UnalignedBarrierHandler):
                        actions = handler.on_buffer(item.channel, item, item.batch is not None)
                    else:
                        actions = handler.on_buffer(item.channel, item)
                    self._handle_barrier_actions(chain, actions)
                if self._stop.processing_suspended:
                    continue
                if pt is not None:
                    self._processing_time(chain)
                chain.flush_if_due()
            if handler is not None:  # every channel ended: release what alignment still holds
                for ch in range(self.gate.num_channels):
                    if ch not in handler.ended:
                        self._handle_barrier_actions(chain, handler.on_end_of_partition(ch))
        self._check_cancelled()
        if self.checkpointing:
            self._poll_checkpoints(chain)
            self._await_stop_outcome(chain)  # the input ended before the savepoint's notification
            for p in self.partitions:
                p.emit_event(EndOfChannel())
        if self._stop.is_finishing:
            self._end_outputs_without_draining()
        else:
            chain.end_input()

    # ------------------------------------------------------------------ stop-with-savepoint
    def _await_stop_outcome(self, chain: OperatorChain) -> None:
        """While suspended by a synchronous savepoint: wait (cancellable) for its completion or
        abort; checkpoint notifications are handled as they come, nothing else runs."""
        while self._stop.is_suspended:
            self._check_cancelled()
            try:
                cid, completed = self._notifications.get(timeout=CHECKPOINT_POLL_S)
            except Empty:
                continue
            self._on_notification(chain, cid, completed)

    def _advance_to_end_of_event_time(self, chain: OperatorChain) -> None:
        """``--drain``: MAX_WATERMARK into the chain before the savepoint's snapshot, so every
        event-time timer and window fires (here and downstream) before the barrier."""
        if chain.is_source:  # a source has no input: the watermark starts at its output
            emit = getattr(chain.head.output, "emit_watermark", None)
            if emit is not None:
                emit(MAX_WATERMARK)
        else:
            chain.process_watermark(MAX_WATERMARK)

    def _end_outputs_without_draining(self) -> None:
        """After a stop's savepoint: flush and end every output partition without MAX_WATERMARK
        (Flink's NO_DRAIN end: the consumers' pending event time stays in the savepoint). With
        ``--drain`` the MAX_WATERMARK went out before the barrier already."""
        for out in self._outputs:
            out.end_watermark = False
            out.end_input()

    # ------------------------------------------------------------------ checkpoints
    def _state_manager(self, config: dict) -> Any:
        from yarnflink.checkpoint.storage import FsCheckpointStorage, make_config_reader, storage_options_from_config
        from yarnflink.state.task_state import TaskStateManager

        directory = config.get("execution.checkpointing.dir") or ""
        options = storage_options_from_config(config, directory) if directory else {}
        if directory:
            from yarnflink.common.config import parse_memory

            threshold = parse_memory(config.get("execution.checkpointing.data-inline-threshold") or "20 kb")
            self._storage = FsCheckpointStorage(
                directory, self.job_id, storage_options=options, inline_threshold=threshold
            )
            self._storage.connect()  # before the task runs, not on its first checkpoint's thread
        restored = None
        if self.tdd.task_state:
            restored = TaskStateSnapshot.from_json(json.loads(self.tdd.task_state.decode("utf-8")))
        self._restored = restored
        return TaskStateManager(
            restored=restored,
            restored_checkpoint_id=self.tdd.restored_checkpoint_id or None,
            reader=make_config_reader(config),
            config=config,
        )

    def _poll_checkpoints(self, chain: OperatorChain) -> None:
        while True:
            if self._stop.processing_suspended:
                break  # taken up again if the stop's savepoint is aborted
            try:
                cid, ts, savepoint, synchronous, drain = self._checkpoint_requests.get_nowait()
            except Empty:
                break
            if any(isinstance(a, AdvanceToEndOfEventTime) for a in self._stop.on_trigger(cid, synchronous, drain)):
                if cid > self._last_checkpoint:
                    self._advance_to_end_of_event_time(chain)
            self._checkpoint(chain, cid, ts, is_savepoint=savepoint, synchronous=synchronous, drain=drain)
        while True:
            try:
                cid, completed = self._notifications.get_nowait()
            except Empty:
                break
            self._on_notification(chain, cid, completed)

    def _on_notification(self, chain: OperatorChain, cid: int, completed: bool) -> None:
        """Checkpoint ``cid`` completed (operators commit, e.g. the FileSink) or was aborted."""
        from yarnflink.state.task_state import notify_chain

        if not completed:
            self._discard_channel_state(cid)
        notify_chain(chain, cid, completed)
        stop = self._stop.on_checkpoint_complete(cid) if completed else self._stop.on_checkpoint_aborted(cid)
        for a in stop:
            if isinstance(a, ResumeProcessing):
                log.info("task %s: stop-with-savepoint %d was aborted; resuming", self.name, cid)
            else:
                log.info("task %s: stop-with-savepoint %d completed; finishing", self.name, cid)

    def _processing_time(self, chain: OperatorChain) -> None:
        """Run the operators whose processing time is due (timers, periodic watermarks, idleness)."""
        pt = chain.next_processing_time()
        if pt is not None:
            now = _now_ms()
            if pt <= now:
                chain.on_processing_time(now)

    def _process_input(self, chain: OperatorChain, item: Any) -> None:
        """One element of the input gate: a batch goes into the chain; a watermark or a
        watermark status goes through the valve, and what comes out of it into the chain."""
        if item.batch is not None:
            self.io_metrics.count_in(item.batch)
            chain.push(Batch.from_arrow(item.batch))
            return
        event = item.event
        if not self._streaming:
            return  # BATCH: event time ends with the input, as Flink ignores watermarks in batch mode
        if isinstance(event, Watermark):
            out = self._valve.input_watermark(item.channel, event)
        elif isinstance(event, WatermarkStatus):
            out = self._valve.input_watermark_status(item.channel, event)
        else:
            return
        for element in out:
            if isinstance(element, Watermark):
                self.io_metrics.current_input_watermark = element.timestamp
            chain.process_watermark(element)

    def _handle_barrier_actions(self, chain: OperatorChain, actions: list) -> None:
        for a in actions:
            if isinstance(a, ProcessBuffer):
                self._process_input(chain, a.item)
            elif isinstance(a, TriggerCheckpointOnBarrier):
                # a savepoint is aligned even with unaligned checkpoints: no channel state
                self._checkpoint(
                    chain,
                    a.barrier.checkpoint_id,
                    a.barrier.timestamp,
                    unaligned=(
                        isinstance(self._barrier_handler, UnalignedBarrierHandler) and not a.barrier.is_savepoint
                    ),
                    is_savepoint=a.barrier.is_savepoint,
                    synchronous=a.barrier.synchronous,
                    drain=a.barrier.drain,
                )
            elif isinstance(a, ChannelStateComplete):
                self._write_channel_state(a)
            elif isinstance(a, AbortCheckpointOnBarrier):
                self._forget_barriers(a.checkpoint_id)
                self._discard_channel_state(a.checkpoint_id)
                self._decline(a.checkpoint_id, a.reason)
                for p in self.partitions:
                    p.emit_event(CancelCheckpointMarker(a.checkpoint_id))

    def _checkpoint(
        self,
        chain: OperatorChain,
        checkpoint_id: int,
        timestamp: int,
        unaligned: bool = False,
        is_savepoint: bool = False,
        synchronous: bool = False,
        drain: bool = False,
    ) -> None:
        """Snapshot the chain, forward the barrier, acknowledge once the state is written (and,
        ``unaligned``, once the input channel state recorded until the last barrier is). The
        forwarded barrier says whether it belongs to a savepoint (handled aligned downstream),
        and whether to a stop-with-savepoint (``synchronous``: the task is suspended after it)."""
        from yarnflink.state.task_state import LazyStreamFactory, snapshot_chain

        if checkpoint_id <= self._last_checkpoint:
            return
        self._last_checkpoint = checkpoint_id
        # per-subtask statistics (Flink's SubtaskStateStats): alignment = first barrier to the
        # last one, start delay = trigger to the first barrier, sync part = up to the barrier
        # going out, async part = until the state is written
        started = time.monotonic()
        first = self._first_barrier.get(checkpoint_id)
        self._forget_barriers(checkpoint_id)
        alignment_ms = (started - first[0]) * 1000.0 if first is not None else 0.0
        start_delay_ms = max(0, (first[1] if first is not None else _now_ms()) - timestamp)
        for nid in chain.order:
            pre = getattr(chain.operators[nid], "prepare_snapshot_pre_barrier", None)
            if pre is not None:
                pre(checkpoint_id)
        chain.flush()
        try:
            storage = self._storage
            factory = LazyStreamFactory(lambda: storage.stream_factory(checkpoint_id)) if storage is not None else None
            channel_future: Future | None = None
            if unaligned:
                channel_future = Future()
                self._channel_state[checkpoint_id] = (channel_future, factory)
            future: Future = snapshot_chain(chain, checkpoint_id, timestamp, factory)
        except Exception as e:  # noqa: BLE001 - declined, the job goes on
            self._discard_channel_state(checkpoint_id)
            log.info("task %s: checkpoint %d failed: %s", self.name, checkpoint_id, e)
            self._decline(checkpoint_id, f"{type(e).__name__}: {e}")
            for p in self.partitions:
                p.emit_event(CancelCheckpointMarker(checkpoint_id))
            return
        barrier = CheckpointBarrier(checkpoint_id, timestamp, is_savepoint, synchronous, drain)
        for p in self.partitions:
            p.emit_event(barrier)
        self._stop.on_snapshot_taken(checkpoint_id, synchronous)
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
                        from yarnflink.state.handles import OperatorSubtaskState

                        head = snapshot.subtask_states.setdefault(head_id, OperatorSubtaskState())
                        head.input_channel_state.extend(handles)
            except BaseException as e:  # noqa: BLE001
                _ACKS.submit(self._decline, checkpoint_id, f"{type(e).__name__}: {e}")
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
                lambda: self._responder.acknowledge_checkpoint(
                    checkpoint_id, self.tdd.attempt_number, snapshot, metrics
                ),
            )

        future.add_done_callback(acknowledge)

    # ------------------------------------------------------------------ unaligned checkpoints
    def _write_channel_state(self, done: ChannelStateComplete) -> None:
        """Every barrier of an unaligned checkpoint arrived: write the recorded in-flight batches
        (off the task thread) and complete the future its acknowledgement waits for."""
        entry = self._channel_state.pop(done.checkpoint_id, None)
        if entry is None:
            return  # its snapshot failed (declined already)
        future, factory = entry
        recorded = {ch: [it.batch for it in items] for ch, items in done.recorded.items()}
        if not recorded:
            future.set_result([])
            return
        num_channels = self.gate.num_channels if self.gate is not None else 0
        name = f"{self.tdd.task_name}-{self.tdd.subtask_index}-chk-{done.checkpoint_id}"

        def write() -> None:
            from yarnflink.checkpoint.channel_state import write_channel_state

            try:
                future.set_result(write_channel_state(recorded, num_channels, factory, name))
            except BaseException as e:  # noqa: BLE001 - declines the checkpoint
                future.set_exception(e)

        _CHANNEL_WRITES.submit(write)

    def _discard_channel_state(self, checkpoint_id: int) -> None:
        """An aborted checkpoint (and older ones): drop the incomplete recording."""
        handler = self._barrier_handler
        if isinstance(handler, UnalignedBarrierHandler):
            handler.abort(checkpoint_id)
        for cid in [c for c in self._channel_state if c <= checkpoint_id]:
            self._channel_state.pop(cid)[0].cancel()

    def _replay_channel_state(self, chain: OperatorChain) -> None:
        """Restored from an unaligned checkpoint: the in-flight batches it persisted go through
        the chain (channel order) before anything is read from the network."""
        restored = self._restored
        if restored is None:
            return
        handles = [h for st in restored.subtask_states.values() for h in st.input_channel_state]
        if not handles:
            return
        from yarnflink.checkpoint.channel_state import read_channel_state
        from yarnflink.checkpoint.storage import make_config_reader

        where = f"checkpoint {self.tdd.restored_checkpoint_id or '?'} of job {self.job_id}"
        batches = read_channel_state(
            handles,
            make_config_reader(dict(self.tdd.job_config)),
            self.gate.num_channels if self.gate is not None else None,
            where,
        )
        log.info("task %s: replaying %d in-flight batches of %s", self.name, len(batches), where)
        for rb in batches:
            self._check_cancelled()
            self.io_metrics.count_in(rb)
            chain.push(Batch.from_arrow(rb))

    def _forget_barriers(self, checkpoint_id: int) -> None:
        for cid in [c for c in self._first_barrier if c <= checkpoint_id]:
            del self._first_barrier[cid]

    def _decline(self, checkpoint_id: int, reason: str) -> None:
        _ACKS.submit(
            self._respond_quietly,
            "declining",
            checkpoint_id,
            lambda: self._responder.decline_checkpoint(checkpoint_id, self.tdd.attempt_number, reason),
        )

    def _respond_quietly(self, what: str, checkpoint_id: int, respond: Callable[[], None]) -> None:
        try:
            respond()
        except Exception as e:  # noqa: BLE001 - the checkpoint times out instead
            log.info("task %s: %s checkpoint %d failed: %s", self.name, what, checkpoint_id, e)

    def info(self) -> dict[str, Any]:
        return {"execution_id": self.execution_id, "name": self.name, "state": self.state.value}
