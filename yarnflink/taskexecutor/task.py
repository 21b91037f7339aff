"""Task: one parallel instance of a JobVertex (an operator chain), run in its own thread.

restore -> invoke (seed 003): the thread builds the chain from the deployment descriptor, creates
its result partitions and input gate, then runs its mailbox loop (``mailbox.py``, Flink's
``MailboxProcessor``) until its input ends or it is cancelled. State changes go to the
TaskExecutor's loop through ``report``.

Everything else that must happen on the task thread arrives as a mail in the task's one queue and
runs between two units of input: checkpoint triggers and completion/abort notifications (from the
TaskExecutor's loop), "input available" (from the input gate), processing-time timers
(``timers.py``) and cancellation. Nothing polls: a task blocked on empty input wakes for a mail at
once. A source's loop emits one batch per unit (``_run_source``), any other task's processes one
element of its input gate (``_run_input``). The collaborators: ``checkpoints.py`` (snapshots,
barriers, acknowledgements), ``input.py`` (the valve and barrier alignment in front of the chain),
``channel_state.py`` (unaligned checkpoints' in-flight data), ``stop.py`` (stop-with-savepoint).

Stop-with-savepoint (FLIP-34, ``docs/SAVEPOINTS.md``): a task that snapshots a synchronous
savepoint is suspended (``StopWithSavepointLatch``): a source emits no record and no
processing-time callback runs until the savepoint's completion notification (its sinks commit,
then the task ends its outputs without ``MAX_WATERMARK`` and finishes without ending its
operators' input, so nothing is emitted after the savepoint) or its abort (the task goes on).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from functools import partial
from typing import Any

import cloudpickle

from yarnflink.checkpoint.barriers import CheckpointBarrier, UnalignedBarrierHandler, create_barrier_handler
from yarnflink.checkpoint.config import checkpointing_enabled
from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.common.config import parse_memory
from yarnflink.common.lazy import load_module
from yarnflink.common.records import Batch
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.jobmaster.gateway import SerializedThrowable
from yarnflink.metrics.task import TaskIOMetrics
from yarnflink.network import (
    BlockingResultPartition,
    InputChannelSpec,
    InputGate,
    PartitionException,
    ResultPartition,
    ShuffleEnvironment,
)
from yarnflink.operators.base import Cancellation, OperatorContext, TaskCancelled
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.partitioners import NetworkOutput
from yarnflink.operators.watermarks import StatusWatermarkValve
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.state.task_state import TaskStateManager, notify_chain
from yarnflink.taskexecutor.cancellation import (
    CancellationSettings,
    CancellationWatch,
    TaskCanceler,
    TaskInterrupted,
    clear_async_exception,
    raise_async_exception,
)
from yarnflink.taskexecutor.channel_state import ChannelStateWriter, replay_channel_state
from yarnflink.taskexecutor.checkpoint_responder import CheckpointResponder, NoCheckpointResponder
from yarnflink.taskexecutor.checkpoints import CheckpointTrigger, SubtaskCheckpointCoordinator, open_task_state
from yarnflink.taskexecutor.gateway import TaskDeploymentDescriptor
from yarnflink.taskexecutor.input import CheckpointedInput, EndOfChannel, StreamTaskNetworkInput
from yarnflink.taskexecutor.mailbox import Mail, MailboxController, MailboxProcessor, ScheduledMail, TaskMailbox
from yarnflink.taskexecutor.stop import StopWithSavepoint, advance_to_end_of_event_time, end_outputs_without_draining
from yarnflink.taskexecutor.timers import ProcessingTimeTimer

log = logging.getLogger(__name__)

StateReporter = Callable[["Task", ExecutionState, SerializedThrowable | None], None]

__all__ = ["EndOfChannel", "StateReporter", "Task", "TaskCancelled", "TaskInterrupted", "checkpointing_enabled"]


def _log_fatal_error(reason: str) -> None:
    log.critical("fatal error of the TaskExecutor (no handler): %s", reason)


@dataclass(frozen=True, slots=True)
class CheckpointNotification:
    """The action of a notification mail; a task that fails or is cancelled still delivers the
    completed ones it had not run (see ``Task._notify_completed``)."""

    checkpoint_id: int
    completed: bool
    deliver: Callable[[int, bool], None]

    def __call__(self) -> None:
        self.deliver(self.checkpoint_id, self.completed)


class Task:
    def __init__(
        self,
        tdd: TaskDeploymentDescriptor,
        shuffle: ShuffleEnvironment,
        report: StateReporter,
        send_to_coordinator: Callable[[str, bytes], None],
        buffer_timeout_s: float = 0.1,
        checkpoint_responder: CheckpointResponder | None = None,
        cancellation: CancellationSettings | None = None,
        fatal_error: Callable[[str], None] = _log_fatal_error,
        send_to_coordinator_later: Callable[[str, Callable[[], list[bytes]]], Future] | None = None,
    ) -> None:
        """``send_to_coordinator_later``: the asynchronous form of ``send_to_coordinator``
        (``OperatorContext.send_to_coordinator_later``). ``cancellation``: when a cancelled task that does not end is interrupted, and when it
        is a ``fatal_error`` of the TaskExecutor (``cancellation.py``)."""
        self.tdd = tdd
        self.execution_id = tdd.execution_id
        self.job_id = tdd.job_id
        self.name = f"{tdd.task_name} ({tdd.subtask_index + 1}/{tdd.parallelism})"
        self.shuffle = shuffle
        self._report = report
        self._send = send_to_coordinator
        self._send_later = send_to_coordinator_later
        self._responder: CheckpointResponder = checkpoint_responder or NoCheckpointResponder()
        self._buffer_timeout_s = buffer_timeout_s
        self.state = ExecutionState.DEPLOYING
        self._cancelled = threading.Event()
        #: read by the operators' per-record loops (a plain attribute: cheap)
        self.cancellation = Cancellation(self.name)
        self._cancellation_settings = cancellation or CancellationSettings()
        self._fatal_error = fatal_error
        self.canceler: TaskCanceler | None = None
        # interrupts (asynchronous exceptions) reach the thread only while it runs the task's
        # code, never while it reports its final state (see _leave_interruptible)
        self._interrupt_lock = threading.Lock()
        self._interruptible = False
        self._thread = threading.Thread(target=self._run, name=f"Task {self.name}", daemon=True)
        self.partitions: list[ResultPartition | BlockingResultPartition] = []
        #: set when the task failed reading an upstream partition (reported to the JobMaster)
        self.failed_partition_id = ""
        self.gate: InputGate | None = None
        self._valve: StatusWatermarkValve | None = None
        self._streaming = (tdd.runtime_mode or "STREAMING") == "STREAMING"
        self._outputs: list[NetworkOutput] = []
        self.io_metrics = TaskIOMetrics()  # read by the TaskExecutor (metrics, final IOMetrics)
        # the task thread's one queue: triggers and notifications arrive on the TaskExecutor's
        # loop, input availability on the network's threads; all run on the task thread
        self.mailbox = TaskMailbox()
        self._processor = MailboxProcessor(self.mailbox)
        self._input_available = Mail(self._processor.resume_default_action, "input available")
        self._input_deadline: ScheduledMail | None = None
        self._channels_resolved = False
        self._timer: ProcessingTimeTimer | None = None
        self._chain: OperatorChain | None = None
        self._state_manager: TaskStateManager | None = None
        # checkpoints (see docs/STATE_AND_EVENT_TIME.md)
        config = dict(tdd.job_config)
        self.checkpointing = checkpointing_enabled(config, tdd.runtime_mode)
        self._unaligned = str(config.get(CheckpointingOptions.ENABLE_UNALIGNED.key) or "").strip().lower() in (
            "true",
            "1",
            "yes",
        )
        self._channel_state = ChannelStateWriter(f"{tdd.task_name}-{tdd.subtask_index}")
        self._checkpoints = SubtaskCheckpointCoordinator(
            self.name, tdd.attempt_number, self.partitions, self.io_metrics, self._responder, self._channel_state
        )
        self._restored: TaskStateSnapshot | None = None
        #: stop-with-savepoint: suspended after a synchronous savepoint's snapshot, then finishing
        self._stop = StopWithSavepoint(self.name)

    def trigger_checkpoint(
        self,
        checkpoint_id: int,
        timestamp: int,
        is_savepoint: bool = False,
        synchronous: bool = False,
        drain: bool = False,
    ) -> None:
        """From any thread: a source (or a task whose inputs all ended) starts checkpoint n
        (``synchronous``: the savepoint of a stop-with-savepoint, ``drain``: MAX_WATERMARK first).
        A task without checkpointing, or one that ended, ignores it."""
        if not self.checkpointing:
            return
        trigger = CheckpointTrigger(checkpoint_id, timestamp, is_savepoint, synchronous, drain)
        self.mailbox.try_put(Mail(partial(self._on_trigger, trigger), f"trigger of checkpoint {checkpoint_id}"))

    def notify_checkpoint(self, checkpoint_id: int, completed: bool) -> None:
        """From any thread: checkpoint n completed (or was aborted)."""
        what = "completion" if completed else "abort"
        notification = CheckpointNotification(checkpoint_id, completed, self._on_notification)
        self.mailbox.try_put(Mail(notification, f"{what} of checkpoint {checkpoint_id}"))

    def start(self) -> None:
        # pandas loads on first use (a TaskExecutor idles without it), but never inside two task
        # threads at once: one thread's import and pyarrow's own lazy `import pandas` in another
        # deadlock in pandas' import cycles (_DeadlockError). Loaded here, on the TaskExecutor's
        # thread before any task thread runs, the task threads find it imported.
        load_module("pandas")
        self._thread.start()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def cancel(self) -> None:
        """From any thread: stops the task; blocked reads and writes are released. A task whose
        thread does not end by itself is interrupted, and past ``task.cancellation.timeout`` the
        TaskExecutor fails fatally (``cancellation.py``)."""
        self.cancellation.cancelled = True  # the operators stop between two records
        self._cancelled.set()
        self.mailbox.try_put(Mail(self._check_cancelled, "cancel"), first=True)
        if self.gate is not None:
            self.gate.close()
        for p in self.partitions:
            p.release()
        self._start_canceler()

    def _start_canceler(self) -> None:
        with self._interrupt_lock:
            if self.canceler is not None or not self._thread.is_alive():
                return
            settings = self._cancellation_settings
            watch = CancellationWatch(self.name, time.monotonic(), settings.interval_s, settings.timeout_s)
            self.canceler = TaskCanceler(watch, self._thread, self._interrupt, self._fatal_error)
        self.canceler.start()

    def _interrupt(self) -> None:
        """From the canceler's thread: TaskInterrupted in the task thread, if it still runs the
        task's code."""
        with self._interrupt_lock:
            ident = self._thread.ident
            if self._interruptible and ident is not None:
                raise_async_exception(ident, TaskInterrupted)

    # ------------------------------------------------------------------ the task thread
    def _set_state(self, state: ExecutionState, error: SerializedThrowable | None = None) -> None:
        self.state = state
        self._report(self, state, error)

    def _run(self) -> None:
        chain: OperatorChain | None = None
        try:
            self._set_state(ExecutionState.INITIALIZING)
            self._interruptible = True
            chain = self._chain = self._restore()
            self._check_cancelled()
            self._set_state(ExecutionState.RUNNING)
            self._invoke(chain)
            chain.close()
            chain = None
            self._leave_interruptible()
            self._set_state(ExecutionState.FINISHED)
        except BaseException as e:  # noqa: BLE001 - every failure of user code ends here
            self._leave_interruptible()
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
            self.mailbox.close()
            if self.gate is not None:
                self.gate.close()

    def _leave_interruptible(self) -> None:
        """No interrupt reaches the thread after this: one set but not yet raised is dropped,
        one raised meanwhile is swallowed here (the task ends anyway)."""
        ident = self._thread.ident
        while True:
            try:
                with self._interrupt_lock:
                    self._interruptible = False
                    if ident is not None:
                        clear_async_exception(ident)
                return
            except TaskInterrupted:
                continue

    def _notify_completed(self, chain: OperatorChain) -> None:
        """Completed-checkpoint notifications that arrived before the task ended (cancelled, or
        failed because an upstream task was cancelled) are delivered: a completed checkpoint's
        sink commits are always safe, and the JobMaster cancels a job (cancel-with-savepoint)
        only after notifying it of the savepoint."""
        for mail in self.mailbox.close():
            notification = mail.action
            if isinstance(notification, CheckpointNotification) and notification.completed:
                notify_chain(chain, notification.checkpoint_id, True)

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
                send_to_coordinator_later=self._send_later,
                is_running=lambda: not self._cancelled.is_set(),
                cancellation=self.cancellation,
            )

        state_manager = None
        if self.checkpointing or tdd.task_state:
            restored = open_task_state(
                config,
                self.job_id,
                config.get(CheckpointingOptions.CHECKPOINTS_DIRECTORY.key) or "",
                parse_memory(config.get(CheckpointingOptions.FS_SMALL_FILE_THRESHOLD.key) or "20 kb"),
                tdd.task_state,
                tdd.restored_checkpoint_id,
            )
            self._checkpoints.storage = restored.storage
            self._restored = restored.restored
            state_manager = restored.manager
            self._state_manager = state_manager
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
            self._channel_state.num_channels = self.gate.num_channels
        return chain

    def _invoke(self, chain: OperatorChain) -> None:
        self._timer = ProcessingTimeTimer(self.mailbox, chain, lambda: self._stop.processing_suspended)
        self._timer.reschedule()  # e.g. idleness: due even if no input ever comes
        if chain.is_source:
            self._run_source(chain)
        else:
            self._run_input(chain)
        self._timer.stop()  # no processing time once the input ended
        self._check_cancelled()
        if self.checkpointing:
            self._processor.run_ready_mails()  # triggers and notifications that came meanwhile
            # the input ended before the stop's savepoint was completed or aborted
            self._processor.run_until(lambda: not self._stop.is_suspended)
            for p in self.partitions:
                p.emit_event(EndOfChannel())
        if self._stop.is_finishing:
            end_outputs_without_draining(self._outputs)
        else:
            chain.end_input()

    def _run_source(self, chain: OperatorChain) -> None:
        """One batch of the source per unit; a stop's savepoint suspends it (no record after
        its barrier) and its completion ends it."""
        batches = iter(chain.source_batches())
        timer = self._timer
        assert timer is not None

        def emit_next(controller: MailboxController) -> None:
            batch = next(batches, None)
            if batch is None:
                controller.all_actions_completed()
                return
            chain.push(batch)
            timer.reschedule()

        self._stop.control(self._processor)
        try:
            self._processor.run_mailbox_loop(emit_next)
        finally:
            self._stop.control(None)

    def _run_input(self, chain: OperatorChain) -> None:
        """One element of the input gate per unit; with no input available the loop waits for
        the gate's "input available" mail (or any other)."""
        gate = self.gate
        assert gate is not None, "a task without a source operator reads an input gate"
        network_input = StreamTaskNetworkInput(gate.num_channels, chain, self.io_metrics, self._streaming)
        self._valve = network_input.valve
        consume = network_input.process
        checkpointed: CheckpointedInput | None = None
        if self.checkpointing:
            mode = str(self.tdd.job_config.get(CheckpointingOptions.CHECKPOINTING_MODE.key) or "EXACTLY_ONCE").upper()
            handler = create_barrier_handler(mode, gate.num_channels, unaligned=self._unaligned)
            if isinstance(handler, UnalignedBarrierHandler):
                self._channel_state.handler = handler
            checkpointed = CheckpointedInput(
                handler, network_input, self._checkpoints, partial(self._checkpoint_on_barrier, chain)
            )
            consume = checkpointed.process
        self._replay_channel_state(chain)
        timer = self._timer
        assert timer is not None
        mailbox, input_available = self.mailbox, self._input_available

        def available() -> None:  # on the thread that made input available
            mailbox.try_put(input_available)

        def process_next(controller: MailboxController) -> None:
            item = gate.poll_next(available)  # with nothing there, the gate calls ``available`` later
            if item is not None:
                consume(item)
                timer.reschedule()
            elif gate.is_finished:
                controller.all_actions_completed()
            else:
                controller.suspend_default_action()
                self._await_input(gate)

        self._processor.run_mailbox_loop(process_next)
        if checkpointed is not None:  # every channel ended: release what alignment still holds
            checkpointed.end_of_input(gate.num_channels)

    def _await_input(self, gate: InputGate) -> None:
        """Nothing to read: the gate puts "input available" into the mailbox when it has something
        (``poll_next`` registered that); a local channel still waiting for its partition wakes
        the task at its request deadline."""
        if self._channels_resolved:
            return
        deadline = gate.pending_deadline()
        if deadline is None:
            self._channels_resolved = True  # a channel never goes back to waiting for its partition
        elif self._input_deadline is None or self._input_deadline.due != deadline:
            if self._input_deadline is not None:
                self.mailbox.cancel(self._input_deadline)
            self._input_deadline = self.mailbox.schedule(deadline, self._input_available)

    # ------------------------------------------------------------------ checkpoint mails
    def _on_trigger(self, trigger: CheckpointTrigger) -> None:
        chain = self._chain
        assert chain is not None
        if self._stop.defer(trigger):
            return  # taken up again if the stop's savepoint is aborted
        if self._stop.advances_to_end_of_event_time(trigger):
            if trigger.checkpoint_id > self._checkpoints.last_checkpoint:
                advance_to_end_of_event_time(chain)
        self._checkpoint(
            chain,
            trigger.checkpoint_id,
            trigger.timestamp,
            is_savepoint=trigger.is_savepoint,
            synchronous=trigger.synchronous,
            drain=trigger.drain,
        )

    def _on_notification(self, checkpoint_id: int, completed: bool) -> None:
        """Checkpoint ``checkpoint_id`` completed (operators commit, e.g. the FileSink) or was aborted."""
        if not self.checkpointing:
            return
        chain = self._chain
        assert chain is not None
        if not completed:
            self._checkpoints.on_checkpoint_aborted(checkpoint_id)
        if self._state_manager is not None:
            self._state_manager.notify_checkpoint(checkpoint_id, completed)
        notify_chain(chain, checkpoint_id, completed)
        for trigger in self._stop.on_notification(checkpoint_id, completed):
            self._on_trigger(trigger)
        if self._timer is not None:
            self._timer.reschedule()  # an aborted stop resumes processing time

    def _checkpoint_on_barrier(self, chain: OperatorChain, barrier: CheckpointBarrier, unaligned: bool) -> None:
        self._checkpoint(
            chain,
            barrier.checkpoint_id,
            barrier.timestamp,
            unaligned=unaligned,
            is_savepoint=barrier.is_savepoint,
            synchronous=barrier.synchronous,
            drain=barrier.drain,
        )

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
        if self._checkpoints.checkpoint(chain, checkpoint_id, timestamp, unaligned, is_savepoint, synchronous, drain):
            self._stop.on_snapshot_taken(checkpoint_id, synchronous)
            if self._timer is not None:
                self._timer.reschedule()  # none while a stop's savepoint suspends processing

    def _replay_channel_state(self, chain: OperatorChain) -> None:
        """Restored from an unaligned checkpoint: its in-flight batches go through the chain first."""

        def push(rb: Any) -> None:
            self._check_cancelled()
            self.io_metrics.count_in(rb)
            chain.push(Batch.from_arrow(rb))

        replay_channel_state(
            self._restored,
            dict(self.tdd.job_config),
            self.gate.num_channels if self.gate is not None else None,
            f"checkpoint {self.tdd.restored_checkpoint_id or '?'} of job {self.job_id}",
            self.name,
            push,
        )

    def info(self) -> dict[str, Any]:
        return {"execution_id": self.execution_id, "name": self.name, "state": self.state.value}
