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
from typing import Any, Callable, Optional

import cloudpickle

from yarnflink.common.records import Batch
from yarnflink.executiongraph.executiongraph import ExecutionState
from yarnflink.network import InputChannelSpec, InputGate, ResultPartition, ShuffleEnvironment
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.chain import OperatorChain
from yarnflink.operators.partitioners import NetworkOutput
from yarnflink.rpc.pb import common_pb2
from yarnflink.rpc.pb import taskexecutor_pb2 as te_pb

log = logging.getLogger(__name__)

StateReporter = Callable[["Task", ExecutionState, Optional[common_pb2.SerializedThrowable]], None]


class TaskCancelled(Exception):
    pass


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
        self.partitions: list[ResultPartition] = []
        self.gate: Optional[InputGate] = None
        self._outputs: list[NetworkOutput] = []

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
                for p in self.partitions:
                    p.fail(e)
                self._set_state(ExecutionState.FAILED, common_pb2.SerializedThrowable(
                    exception_class=type(e).__name__, message=str(e),
                    traceback="".join(traceback.format_exception(e))))
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
            partition = self.shuffle.create_result_partition(rp.partition_id, rp.num_subpartitions)
            self.partitions.append(partition)
            key_selector = cloudpickle.loads(rp.key_selector) if rp.key_selector else None
            out = NetworkOutput(partition, rp.partitioning, rp.num_subpartitions, key_selector,
                                tdd.max_parallelism, tdd.subtask_index,
                                buffer_timeout_s=self._buffer_timeout_s)
            outputs[rp.dataset_id] = out
            self._outputs.append(out)
        channels = [
            InputChannelSpec(c.partition_id, c.subpartition, c.producer_data_address)
            for g in tdd.input_gates for c in g.channels
        ]
        if channels:
            self.gate = self.shuffle.create_input_gate(channels)
        config = dict(tdd.job_config)

        def ctx_factory(operator_name: str) -> OperatorContext:
            return OperatorContext(
                task_name=self.name, operator_name=operator_name,
                subtask_index=tdd.subtask_index, parallelism=tdd.parallelism,
                max_parallelism=tdd.max_parallelism, attempt_number=tdd.attempt_number,
                job_id=tdd.job_id, runtime_mode=tdd.runtime_mode or "STREAMING", config=config,
                send_to_coordinator=self._send, is_running=lambda: not self._cancelled.is_set(),
            )

        chain = OperatorChain(list(tdd.operators), outputs, ctx_factory)
        chain.open()
        return chain

    def _invoke(self, chain: OperatorChain) -> None:
        if chain.is_source:
            for batch in chain.source_batches():
                self._check_cancelled()
                chain.push(batch)
                chain.flush_if_due()
        else:
            assert self.gate is not None, "a task without a source operator reads an input gate"
            while True:
                # wait for input at most until buffered output is due (execution.buffer-timeout)
                deadline = chain.next_flush_deadline()
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    item = self.gate.next(timeout)
                except TimeoutError:
                    chain.flush_if_due()
                    continue
                if item is None:
                    break
                if item.batch is not None:
                    chain.push(Batch.from_arrow(item.batch))
                chain.flush_if_due()
        self._check_cancelled()
        chain.end_input()

    def info(self) -> dict[str, Any]:
        return {"execution_id": self.execution_id, "name": self.name, "state": self.state.value}
