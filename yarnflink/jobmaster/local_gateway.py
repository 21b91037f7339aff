"""The JobMaster's gateways within its process: every call hops onto the JobMaster's loop (its main
thread) and runs there; the caller awaits the answer on its own loop. The Dispatcher reaches the
JobMasters it runs through this, never by running code on their loops itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from yarnflink.common.rpc_errors import RPC_TIMEOUT_S
from yarnflink.jobmaster.collect import CollectedSince
from yarnflink.jobmaster.gateway import (
    AcknowledgeCheckpoint,
    CoordinationData,
    DeclineCheckpoint,
    DisconnectTaskManager,
    OfferSlots,
    ReconnectTaskManager,
    RegisterTaskManager,
    TaskExecutionState,
    TaskManagerHeartbeat,
)
from yarnflink.jobmaster.views import exceptions_json, monitoring_snapshot

if TYPE_CHECKING:
    from collections.abc import Coroutine

    from yarnflink.jobmaster.jobmaster import JobMaster

__all__ = ["LocalJobMasterGateway"]

T = TypeVar("T")


class LocalJobMasterGateway:
    """A JobMasterGateway and JobMasterControlGateway of a JobMaster in this process."""

    def __init__(self, jm: JobMaster) -> None:
        self._jm = jm

    @property
    def job_id(self) -> str:
        return self._jm.job_id

    async def _on_loop(self, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return await self._jm.call_async(fn)

    async def _run(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return await self._jm.call_async(run)

    # ------------------------------------------------------------------ JobMasterControlGateway
    async def request_job_details(self) -> dict[str, Any]:
        return await self._run(self._jm.details)

    async def request_job_exceptions(self) -> dict[str, Any]:
        return await self._run(lambda: exceptions_json(self._jm.eg))

    async def request_monitoring_snapshot(self) -> dict[str, Any]:
        return await self._run(lambda: {"details": self._jm.details(), **monitoring_snapshot(self._jm)})

    async def trigger_savepoint(
        self, target_directory: str | None, *, stop: bool = False, drain: bool = False, cancel_job: bool = False
    ) -> str | None:
        def trigger() -> str | None:
            driver = self._jm.checkpoints
            if driver is None:
                return None
            return driver.trigger_savepoint(target_directory, stop=stop, drain=drain, cancel_job=cancel_job)

        return await self._run(trigger)

    async def request_collected(self, offset: int) -> CollectedSince:
        return await self._run(lambda: self._jm.collect_log.since(offset, self._jm.is_current_attempt))

    async def request_savepoint_status(self, trigger_id: str) -> dict[str, Any] | None:
        def status() -> dict[str, Any] | None:
            driver = self._jm.checkpoints
            return driver.savepoint_status(trigger_id) if driver is not None else None

        return await self._run(status)

    async def cancel(self) -> bool:
        return await self._run(self._jm.cancel)

    async def suspend(self, cause: str, timeout: float = 2.0) -> None:
        await self._on_loop(lambda: self._jm.suspend(cause, timeout))

    # ------------------------------------------------------------------ JobMasterGateway
    async def register_task_manager(self, request: RegisterTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.register_task_manager(request))

    async def offer_slots(self, request: OfferSlots, *, timeout: float = RPC_TIMEOUT_S) -> tuple[str, ...]:
        return await self._on_loop(lambda: self._jm.offer_slots(request))

    async def reconnect_task_manager(self, request: ReconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.reconnect_task_manager(request))

    async def update_task_execution_state(self, request: TaskExecutionState, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.update_task_execution_state(request))

    async def acknowledge_checkpoint(self, request: AcknowledgeCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.acknowledge_checkpoint(request))

    async def decline_checkpoint(self, request: DeclineCheckpoint, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.decline_checkpoint(request))

    async def send_coordination_data(self, request: CoordinationData, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.send_coordination_data(request))

    async def heartbeat_from_task_manager(
        self, request: TaskManagerHeartbeat, *, timeout: float = RPC_TIMEOUT_S
    ) -> None:
        await self._on_loop(lambda: self._jm.heartbeat_from_task_manager(request))

    async def disconnect_task_manager(self, request: DisconnectTaskManager, *, timeout: float = RPC_TIMEOUT_S) -> None:
        await self._on_loop(lambda: self._jm.disconnect_task_manager(request))
