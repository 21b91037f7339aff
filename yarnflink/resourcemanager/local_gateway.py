"""The ResourceManager's control gateway within its process: every call hops onto the
ResourceManager's loop (its main thread) and runs there; the caller awaits the answer on its own
loop. The Dispatcher reads the ResourceManager through this, never by running code on its loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yarnflink.resourcemanager.gateway import ResourceOverview, TaskManagerInfo

if TYPE_CHECKING:
    from yarnflink.resourcemanager.resourcemanager import ResourceManager

__all__ = ["LocalResourceManagerGateway"]


class LocalResourceManagerGateway:
    """A ResourceManagerControlGateway of a ResourceManager in this process."""

    def __init__(self, rm: ResourceManager) -> None:
        self._rm = rm

    @property
    def address(self) -> str:
        return self._rm.address  # fixed once the ResourceManager serves

    async def request_task_manager_info(self) -> tuple[TaskManagerInfo, ...]:
        return await self._rm.call_async(self._rm.request_task_manager_info)

    async def request_resource_overview(self) -> ResourceOverview:
        return await self._rm.call_async(self._rm.request_resource_overview)
