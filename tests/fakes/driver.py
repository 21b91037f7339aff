"""TestingResourceManagerDriver: the ResourceManagerDriver of an active ResourceManager under test
(Flink's TestingResourceManagerDriver idea). It starts no process: it records the workers asked
for and stopped, names them ``worker-1``, ``worker-2``, ... (or as ``start_worker_function`` says,
which may raise: a failed start), and lets the test report their ends through ``handler``.
"""

from __future__ import annotations

from collections.abc import Callable

from yarnflink.resourcemanager.driver import ResourceEventHandler
from yarnflink.resourcemanager.resources import WorkerSpec

__all__ = ["TestingResourceManagerDriver"]


class TestingResourceManagerDriver:
    __test__ = False  # not a pytest test class

    def __init__(self) -> None:
        #: set by ``initialize``: where the test reports workers' ends (``on_worker_terminated``)
        self.handler: ResourceEventHandler | None = None
        self.resource_manager_address = ""
        self.started: list[tuple[str, WorkerSpec]] = []  # (worker id, spec), in order
        self.start_failures = 0
        self.stopped: list[str] = []
        self.terminated = False
        self.start_worker_function: Callable[[WorkerSpec], str] = lambda spec: f"worker-{len(self.started) + 1}"

    def initialize(self, handler: ResourceEventHandler, resource_manager_address: str) -> None:
        self.handler = handler
        self.resource_manager_address = resource_manager_address

    def start_worker(self, spec: WorkerSpec) -> str:
        try:
            worker_id = self.start_worker_function(spec)
        except Exception:
            self.start_failures += 1
            raise
        self.started.append((worker_id, spec))
        return worker_id

    def stop_worker(self, worker_id: str) -> None:
        self.stopped.append(worker_id)

    def terminate(self) -> None:
        self.terminated = True
