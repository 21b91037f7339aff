"""The seam between the ResourceManager and whatever starts worker processes (Flink's
ResourceManagerDriver and ResourceEventHandler). The local-process driver lives in
``yarnflink.deployment.local.driver``; a YARN driver (skein) will implement the same contract.
A standalone ResourceManager has no driver: it uses the TaskExecutors that register by themselves.
"""

from __future__ import annotations

from typing import Protocol

from yarnflink.resourcemanager.resources import WorkerSpec


class ResourceEventHandler(Protocol):
    """What a driver reports back. Drivers may call it from any thread; the ResourceManager hands
    every event over to its own loop."""

    def on_worker_started(self, worker_id: str) -> None:
        """The worker's process runs (it has yet to register)."""

    def on_worker_terminated(self, worker_id: str, diagnostics: str) -> None:
        """The worker's process ended, or could not be started at all."""

    def on_error(self, error: BaseException) -> None:
        """The driver cannot go on (the ResourceManager logs it and keeps what it has)."""


class ResourceManagerDriver(Protocol):
    def initialize(self, handler: ResourceEventHandler, resource_manager_address: str) -> None:
        """Called once, before any other method, with the address workers register at."""

    def start_worker(self, spec: WorkerSpec) -> str:
        """Starts a TaskExecutor of ``spec`` that registers with the returned id as its resource
        id. Returns quickly; the outcome arrives through the handler. Raises if the request could
        not even be made (that counts as a failed start)."""

    def stop_worker(self, worker_id: str) -> None:
        """Stops a worker (idle, or never registered). Its termination is still reported."""

    def terminate(self) -> None:
        """Stops every worker this driver started (the cluster shuts down)."""
