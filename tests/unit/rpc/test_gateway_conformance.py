"""Every implementation of a gateway has the gateway's methods, with its parameters: the endpoints
(which the gRPC servicers call), the gRPC clients and the in-process JobMaster and ResourceManager
gateways. mypy checks the same through the functions at the bottom."""

from __future__ import annotations

import inspect

import pytest

from yarnflink.dispatcher.dispatcher import Dispatcher
from yarnflink.dispatcher.gateway import DispatcherGateway
from yarnflink.jobmaster.gateway import JobMasterControlGateway, JobMasterGateway
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.jobmaster.local_gateway import LocalJobMasterGateway
from yarnflink.resourcemanager.gateway import ResourceManagerControlGateway, ResourceManagerGateway
from yarnflink.resourcemanager.local_gateway import LocalResourceManagerGateway
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.rpc.clients import (
    GrpcGatewayResolver,
    GrpcJobMasterGateway,
    GrpcResourceManagerGateway,
    GrpcTaskExecutorGateway,
)
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.taskexecutor.gateway import TaskExecutorGateway
from yarnflink.taskexecutor.taskexecutor import TaskExecutor

PAIRS = [
    (JobMasterGateway, JobMaster),
    (JobMasterGateway, GrpcJobMasterGateway),
    (JobMasterGateway, LocalJobMasterGateway),
    (JobMasterControlGateway, LocalJobMasterGateway),
    (ResourceManagerGateway, ResourceManager),
    (ResourceManagerGateway, GrpcResourceManagerGateway),
    (ResourceManagerControlGateway, ResourceManager),
    (ResourceManagerControlGateway, LocalResourceManagerGateway),
    (TaskExecutorGateway, TaskExecutor),
    (TaskExecutorGateway, GrpcTaskExecutorGateway),
    (DispatcherGateway, Dispatcher),
]


def _methods(protocol: type) -> list[str]:
    return [n for n, f in vars(protocol).items() if inspect.iscoroutinefunction(f)]


@pytest.mark.parametrize(("protocol", "implementation"), PAIRS, ids=lambda c: c.__name__)
def test_an_implementation_has_every_method_of_its_gateway(protocol: type, implementation: type) -> None:
    assert _methods(protocol), protocol
    for name in _methods(protocol):
        method = getattr(implementation, name, None)
        assert inspect.iscoroutinefunction(method), f"{implementation.__name__}.{name} is not an async method"
        wanted = list(inspect.signature(getattr(protocol, name)).parameters)
        assert list(inspect.signature(method).parameters) == wanted, f"{implementation.__name__}.{name}"


def _jm(x: JobMaster) -> JobMasterGateway:
    return x


def _local(x: LocalJobMasterGateway) -> JobMasterControlGateway:
    return x


def _rm(x: ResourceManager) -> ResourceManagerGateway:
    return x


def _local_rm(x: LocalResourceManagerGateway) -> ResourceManagerControlGateway:
    return x


def _te(x: TaskExecutor) -> TaskExecutorGateway:
    return x


def _dispatcher(x: Dispatcher) -> DispatcherGateway:
    return x


def _resolver(x: GrpcGatewayResolver) -> GatewayResolver:
    return x
