"""Task: one parallel instance of a JobVertex (an operator chain), run in its own thread.

restore -> invoke (seed 003): the thread builds the chain from the deployment descriptor, creates
its result partitions and input gate, then pushes batches through the chain until its input ends
or it is cancelled. State changes go to the TaskExecutor's loop through ``report``.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any, Callable, Optional, Union

import json
from concurrent.futures import Future, ThreadPoolExecutor
from queue import Empty, SimpleQueue

import cloudpickle

from yarnflink.checkpoint.barriers import (
    AbortCheckpointOnBarrier,
    CancelCheckpointMarker,
    CheckpointBarrier,
    ProcessBuffer,
    TriggerCheckpointOnBarrier,
    create_barrier_handler,
)
from yarnflink.state.handles import TaskStateSnapshot

from yarnflink.common.records import Batch
from yarnflink.executiongraph.executiongraph import ExecutionState
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
from yarnflink.rpc.pb import common_pb2
from yarnflink.rpc.pb import taskexecutor_pb2 as te_pb

log = logging.getLogger(__name__)

StateReporter = Callable[["Task", ExecutionState, Optional[common_pb2.SerializedThrowable]], None]


class TaskCancelled(Exception):
    pass


class EndOfChannel:
    """Sent on every output partition before a checkpointing task ends its input: the consumer's
    barrier handler stops waiting for barriers from that channel."""

    def __reduce__(self) -> Any:
        return (EndOfChannel, ())


#: acknowledgements and declines go to the JobMaster off the task threads
_ACKS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="checkpoint-ack")
#: how often a waiting task looks for checkpoint triggers and notifications (s)
CHECKPOINT_POLL_S = 0.05


def checkpointing_enabled(config: dict, runtime_mode: str) -> bool:
    """Periodic checkpoints run in STREAMING jobs with ``execution.checkpointing.interval`` set."""
    interval = (config.get("execution.checkpointing.interval") or "").strip()
    return bool(interval) and interval not in ("0", "0 ms", "0ms") and (runtime_mode or "STREAMING") == "STREAMING"


class Task:
    def __init__(self, tdd: te_pb.TaskDeploymentDescriptor, shuffle: ShuffleEnvironment,
                 report: StateReporter, send_to_coordinator: Callable[[str, bytes], None],
                 buffer_timeout_s: float = 0.1) -> None:
        self.tdd = tdd
        self.execution_id = tdd.execution_id
        self.job_id = tdd.job_id
        self.name = f"{tdd.task_name} ({tdd.subtask_index + 1}/{tdd.parallelism})"
        self.shuffle = shuffle
        self._report = report
        self._send = send_to_coordinator
        self._buffer_timeout_s = buffer_timeout_s
        self.state = ExecutionState.DEPLOYING
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"Task {self.name}", daemon=True)
        self.partitions: list[Union[ResultPartition, BlockingResultPartition]] = []
        #: set when the task failed reading an upstream partition (reported to the JobMaster)
        self.failed_partition_id = ""
        self.gate: Optional[InputGate] = None
        self._outputs: list[NetworkOutput] = []
        self.io_metrics = TaskIOMetrics()  # read by the TaskExecutor (metrics, final IOMetrics)
        # checkpoints (see docs/STATE_AND_EVENT_TIME.md): triggers and notifications arrive on the
        # TaskExecutor's loop and are carried out by the task thread between batches
        config = dict(tdd.job_config)
        self.checkpointing = checkpointing_enabled(config, tdd.runtime_mode)
        self._checkpoint_requests: "SimpleQueue[tuple[int, int, bool]]" = SimpleQueue()
        self._notifications: "SimpleQueue[tuple[int, bool]]" = SimpleQueue()
        self._storage: Any = None
        self._barrier_handler: Any = None
        self._last_checkpoint = 0

    def trigger_checkpoint(self, checkpoint_id: int, timestamp: int, is_savepoint: bool = False) -> None:
        """From any thread: a source (or a task whose inputs all ended) starts checkpoint n."""
        self._checkpoint_requests.put((checkpoint_id, timestamp, is_savepoint))

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
    def _set_state(self, state: ExecutionState, error: Optional[common_pb2.SerializedThrowable] = None) -> None:
        self.state = state
        self._report(self, state, error)

    def _run(self) -> None:
        chain: Optional[OperatorChain] = None
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
                self._set_state(ExecutionState.FAILED, common_pb2.SerializedThrowable(
                    exception_class=type(e).__name__, message=str(e),
                    traceback="".join(traceback.format_exception(e))))
                for p in self.partitions:
                    p.fail(e)
        finally:
            if self.gate is not None:
                self.gate.close()

    def _check_cancelled(self) -> None:
        if self._cancelled.is_set():
            raise TaskCancelled(self.name)

    def _restore(self) -> OperatorChain:
        tdd = self.tdd
        outputs: dict[str, NetworkOutput] = {}
        for rp in tdd.produced_partitions:
            partition = self.shuffle.create_result_partition(
                rp.partition_id, rp.num_subpartitions, blocking=rp.result_type == "BLOCKING")
            self.partitions.append(partition)
            key_selector = cloudpickle.loads(rp.key_selector) if rp.key_selector else None
            out = NetworkOutput(partition, rp.partitioning, rp.num_subpartitions, key_selector,
                                tdd.max_parallelism, tdd.subtask_index,
                                buffer_timeout_s=self._buffer_timeout_s)
            outputs[rp.dataset_id] = out
            self._outputs.append(out)
            self.io_metrics.register_output(out, partition)
        config = dict(tdd.job_config)

        def ctx_factory(operator_name: str) -> OperatorContext:
            return OperatorContext(
                task_name=self.name, operator_name=operator_name,
                subtask_index=tdd.subtask_index, parallelism=tdd.parallelism,
                max_parallelism=tdd.max_parallelism, attempt_number=tdd.attempt_number,
                job_id=tdd.job_id, runtime_mode=tdd.runtime_mode or "STREAMING", config=config,
                send_to_coordinator=self._send, is_running=lambda: not self._cancelled.is_set(),
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
            for g in tdd.input_gates for c in g.channels
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
                chain.flush_if_due()
                if self.checkpointing:
                    self._poll_checkpoints(chain)
        else:
            assert self.gate is not None, "a task without a source operator reads an input gate"
            handler = None
            if self.checkpointing:
                mode = str(self.tdd.job_config.get("execution.checkpointing.mode") or "EXACTLY_ONCE").upper()
                handler = self._barrier_handler = create_barrier_handler(mode, self.gate.num_channels)
            while True:
                # wait for input at most until buffered output is due (execution.buffer-timeout)
                deadline = chain.next_flush_deadline()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                if handler is not None:
                    self._poll_checkpoints(chain)
                    timeout = CHECKPOINT_POLL_S if timeout is None else min(timeout, CHECKPOINT_POLL_S)
                try:
                    item = self.gate.next(timeout)
                except TimeoutError:
                    chain.flush_if_due()
                    continue
                if item is None:
                    break
                if handler is None:
                    if item.batch is not None:
                        self.io_metrics.count_in(item.batch)
                        chain.push(Batch.from_arrow(item.batch))
                else:
                    event = item.event
                    if isinstance(event, CheckpointBarrier):
                        actions = handler.on_barrier(item.channel, event)
                    elif isinstance(event, CancelCheckpointMarker):
                        actions = handler.on_cancel_marker(item.channel, event)
                    elif isinstance(event, EndOfChannel):
                        actions = [] if item.channel in handler.ended else handler.on_end_of_partition(item.channel)
                    else:
                        actions = handler.on_buffer(item.channel, item)
                    self._handle_barrier_actions(chain, actions)
                chain.flush_if_due()
            if handler is not None:  # every channel ended: release what alignment still holds
                for ch in range(self.gate.num_channels):
                    if ch not in handler.ended:
                        self._handle_barrier_actions(chain, handler.on_end_of_partition(ch))
        self._check_cancelled()
        if self.checkpointing:
            self._poll_checkpoints(chain)
            for p in self.partitions:
                p.emit_event(EndOfChannel())
        chain.end_input()

    # ------------------------------------------------------------------ checkpoints
    def _state_manager(self, config: dict) -> Any:
        from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader, storage_options_from_config
        from yarnflink.state.task_state import TaskStateManager

        directory = config.get("execution.checkpointing.dir") or ""
        options = storage_options_from_config(config, directory) if directory else {}
        if directory:
            self._storage = FsCheckpointStorage(directory, self.job_id, storage_options=options)
        restored = None
        if self.tdd.task_state:
            restored = TaskStateSnapshot.from_json(json.loads(self.tdd.task_state.decode("utf-8")))
        return TaskStateManager(restored=restored, restored_checkpoint_id=self.tdd.restored_checkpoint_id or None,
                                reader=make_reader(options), config=config)

    def _poll_checkpoints(self, chain: OperatorChain) -> None:
        while True:
            try:
                cid, ts, _savepoint = self._checkpoint_requests.get_nowait()
            except Empty:
                break
            self._checkpoint(chain, cid, ts)
        while True:
            try:
                cid, completed = self._notifications.get_nowait()
            except Empty:
                break
            from yarnflink.state.task_state import notify_chain

            notify_chain(chain, cid, completed)

    def _handle_barrier_actions(self, chain: OperatorChain, actions: list) -> None:
        for a in actions:
            if isinstance(a, ProcessBuffer):
                item = a.item
                if item.batch is not None:
                    self.io_metrics.count_in(item.batch)
                    chain.push(Batch.from_arrow(item.batch))
            elif isinstance(a, TriggerCheckpointOnBarrier):
                self._checkpoint(chain, a.barrier.checkpoint_id, a.barrier.timestamp)
            elif isinstance(a, AbortCheckpointOnBarrier):
                self._decline(a.checkpoint_id, a.reason)
                for p in self.partitions:
                    p.emit_event(CancelCheckpointMarker(a.checkpoint_id))

    def _checkpoint(self, chain: OperatorChain, checkpoint_id: int, timestamp: int) -> None:
        """Snapshot the chain, forward the barrier, acknowledge once the state is written."""
        from yarnflink.state.task_state import snapshot_chain

        if checkpoint_id <= self._last_checkpoint:
            return
        self._last_checkpoint = checkpoint_id
        for nid in chain.order:
            pre = getattr(chain.operators[nid], "prepare_snapshot_pre_barrier", None)
            if pre is not None:
                pre(checkpoint_id)
        chain.flush()
        try:
            factory = self._storage.stream_factory(checkpoint_id) if self._storage is not None else None
            future: Future = snapshot_chain(chain, checkpoint_id, timestamp, factory)
        except Exception as e:  # noqa: BLE001 - declined, the job goes on
            log.info("task %s: checkpoint %d failed: %s", self.name, checkpoint_id, e)
            self._decline(checkpoint_id, f"{type(e).__name__}: {e}")
            for p in self.partitions:
                p.emit_event(CancelCheckpointMarker(checkpoint_id))
            return
        barrier = CheckpointBarrier(checkpoint_id, timestamp)
        for p in self.partitions:
            p.emit_event(barrier)

        def acknowledge(f: Future) -> None:
            try:
                snapshot: TaskStateSnapshot = f.result()
            except BaseException as e:  # noqa: BLE001
                _ACKS.submit(self._decline, checkpoint_id, f"{type(e).__name__}: {e}")
                return
            payload = json.dumps({"checkpoint_id": checkpoint_id, "attempt": self.tdd.attempt_number,
                                  "state": snapshot.to_json()}).encode("utf-8")
            _ACKS.submit(self._send_quietly, "checkpoint-ack", payload)

        future.add_done_callback(acknowledge)

    def _decline(self, checkpoint_id: int, reason: str) -> None:
        payload = json.dumps({"checkpoint_id": checkpoint_id, "attempt": self.tdd.attempt_number,
                              "reason": reason}).encode("utf-8")
        _ACKS.submit(self._send_quietly, "checkpoint-decline", payload)

    def _send_quietly(self, kind: str, payload: bytes) -> None:
        try:
            self._send(kind, payload)
        except Exception as e:  # noqa: BLE001 - the checkpoint times out instead
            log.info("task %s: sending %s failed: %s", self.name, kind, e)

    def info(self) -> dict[str, Any]:
        return {"execution_id": self.execution_id, "name": self.name, "state": self.state.value}
