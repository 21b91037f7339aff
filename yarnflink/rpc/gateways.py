"""Clients of other components' gateways, and fencing on the server side.

A ``GatewayPool`` belongs to one endpoint (gRPC aio channels are bound to the loop that made them)
and caches one channel per address.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import grpc

from yarnflink.rpc.endpoint import GRPC_OPTIONS
from yarnflink.rpc.pb import (
    jobmaster_pb2_grpc,
    resourcemanager_pb2_grpc,
    taskexecutor_pb2_grpc,
)
from yarnflink.rpc.tls import channel_credentials

S = TypeVar("S")

#: Deadline for a single RPC between components.
RPC_TIMEOUT_S = 10.0


class FencingTokenMismatch(Exception):
    pass


async def check_fencing(context: grpc.aio.ServicerContext, expected: str, got: str, who: str) -> None:
    """Rejects a call whose fencing token is not the endpoint's current one (Flink's
    FencedRpcEndpoint). Aborting raises inside the servicer, so the handler stops here."""
    if not got or got != expected:
        await context.abort(
            grpc.StatusCode.FAILED_PRECONDITION,
            f"fencing token mismatch for {who}: expected {expected or '<none>'}, got {got or '<none>'}",
        )


class _Pool(Generic[S]):
    def __init__(self, stub_factory: Callable[[grpc.aio.Channel], S]) -> None:
        self._factory = stub_factory
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[str, S] = {}

    def get(self, address: str) -> S:
        stub = self._stubs.get(address)
        if stub is None:
            creds = channel_credentials()
            ch = (
                grpc.aio.secure_channel(address, creds, options=GRPC_OPTIONS)
                if creds is not None
                else grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
            )
            self._channels[address] = ch
            stub = self._stubs[address] = self._factory(ch)
        return stub

    async def drop(self, address: str) -> None:
        ch = self._channels.pop(address, None)
        self._stubs.pop(address, None)
        if ch is not None:
            await ch.close()

    async def close(self) -> None:
        for addr in list(self._channels):
            await self.drop(addr)


class GatewayPool:
    """Stubs for the three gateways, cached per address."""

    def __init__(self) -> None:
        self.resource_managers: _Pool[Any] = _Pool(resourcemanager_pb2_grpc.ResourceManagerGatewayStub)
        self.task_executors: _Pool[Any] = _Pool(taskexecutor_pb2_grpc.TaskExecutorGatewayStub)
        self.job_masters: _Pool[Any] = _Pool(jobmaster_pb2_grpc.JobMasterGatewayStub)

    def resource_manager(self, address: str) -> Any:
        return self.resource_managers.get(address)

    def task_executor(self, address: str) -> Any:
        return self.task_executors.get(address)

    def job_master(self, address: str) -> Any:
        return self.job_masters.get(address)

    async def close(self) -> None:
        await self.resource_managers.close()
        await self.task_executors.close()
        await self.job_masters.close()
