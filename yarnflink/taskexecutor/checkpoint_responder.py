"""CheckpointResponder (Flink's): how a Task acknowledges or declines a checkpoint to its JobMaster.

Called on a task's acknowledgement threads (never the TaskExecutor's loop); each call blocks until
the JobMaster has the message or the call failed (RpcException).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S
from yarnflink.jobmaster.gateway import AcknowledgeCheckpoint, CheckpointMetrics, DeclineCheckpoint, JobMasterGateway
from yarnflink.state.handles import TaskStateSnapshot

__all__ = ["CheckpointResponder", "NoCheckpointResponder", "RpcCheckpointResponder"]


class CheckpointResponder(Protocol):
    def acknowledge_checkpoint(
        self, checkpoint_id: int, attempt_number: int, subtask_state: TaskStateSnapshot, metrics: CheckpointMetrics
    ) -> None: ...

    def decline_checkpoint(self, checkpoint_id: int, attempt_number: int, reason: str) -> None: ...


class NoCheckpointResponder:
    """For a task whose checkpoints nobody waits for (tests of the task alone)."""

    def acknowledge_checkpoint(
        self, checkpoint_id: int, attempt_number: int, subtask_state: TaskStateSnapshot, metrics: CheckpointMetrics
    ) -> None:
        pass

    def decline_checkpoint(self, checkpoint_id: int, attempt_number: int, reason: str) -> None:
        pass


class RpcCheckpointResponder:
    """Sends a task's answers through its JobMaster's gateway, on the TaskExecutor's loop.

    ``job_master`` and ``jobmaster_id`` are read when an answer is sent: with HA the job's
    JobMaster may change while the task runs (a new leader adopts it). ``ready``: awaited first
    (HA: while the job has no leader the answers wait, in order, for the next one)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        job_master: Callable[[], JobMasterGateway],
        jobmaster_id: Callable[[], str],
        execution_id: str,
        ready: Callable[[], Awaitable[object]] | None = None,
    ) -> None:
        self._loop = loop
        self._job_master = job_master  # resolved on the loop (a gateway belongs to its loop)
        self._jobmaster_id = jobmaster_id
        self._execution_id = execution_id
        self._ready = ready

    async def _wait_ready(self) -> None:
        if self._ready is not None:
            await self._ready()

    def acknowledge_checkpoint(
        self, checkpoint_id: int, attempt_number: int, subtask_state: TaskStateSnapshot, metrics: CheckpointMetrics
    ) -> None:
        async def send() -> None:
            await self._wait_ready()
            ack = AcknowledgeCheckpoint(
                self._jobmaster_id(), self._execution_id, checkpoint_id, attempt_number, subtask_state, metrics
            )
            await self._job_master().acknowledge_checkpoint(ack, timeout=RPC_TIMEOUT_S * 3)

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(RPC_TIMEOUT_S * 6)

    def decline_checkpoint(self, checkpoint_id: int, attempt_number: int, reason: str) -> None:
        async def send() -> None:
            await self._wait_ready()
            decline = DeclineCheckpoint(self._jobmaster_id(), self._execution_id, checkpoint_id, attempt_number, reason)
            await self._job_master().decline_checkpoint(decline, timeout=RPC_TIMEOUT_S * 3)

        asyncio.run_coroutine_threadsafe(send(), self._loop).result(RPC_TIMEOUT_S * 6)
