"""GatewayResolver: how an endpoint reaches its peers' gateways by address. An endpoint is given
one in its constructor; production passes the gRPC implementation
(``yarnflink.rpc.clients.GrpcGatewayResolver``), unit tests a small fake that hands out
``Testing*Gateway`` objects. Importable without grpc.
"""

from __future__ import annotations

from typing import Protocol

from yarnflink.jobmaster.gateway import JobMasterGateway
from yarnflink.resourcemanager.gateway import ResourceManagerGateway
from yarnflink.taskexecutor.gateway import TaskExecutorGateway

__all__ = ["GatewayResolver"]


class GatewayResolver(Protocol):
    def resource_manager(self, address: str) -> ResourceManagerGateway: ...

    def task_executor(self, address: str) -> TaskExecutorGateway: ...

    def job_master(self, address: str) -> JobMasterGateway: ...

    async def forget(self, address: str) -> None:
        """Drops what is cached for ``address`` (its peer is gone; a new one may come there)."""
        ...

    async def close(self) -> None: ...
