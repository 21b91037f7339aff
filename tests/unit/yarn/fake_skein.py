"""A small fake of skein's client side for the YARN tests: records every request and lets a test
move containers through their states (what YARN would do)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class FakeContainer:
    service_name: str
    instance: int
    state: str = "REQUESTED"
    yarn_container_id: str = ""
    exit_message: str = ""
    env: dict[str, str] = field(default_factory=dict)
    yarn_node_http_address: str = "node2.example.com:8042"

    @property
    def id(self) -> str:
        return f"{self.service_name}_{self.instance}"


class FakeApplicationClient:
    def __init__(self) -> None:
        self.containers: dict[str, FakeContainer] = {}
        self.requests: list[tuple[str, Any]] = []
        self.kv: dict[str, bytes] = {}
        self.refuse: Exception | None = None
        self.shutdowns: list[str] = []
        self.report: FakeReport | None = None  # the application's report: FINISHED once shut down
        self._instances = itertools.count()
        self._lock = threading.Lock()

    def add_container(self, service: str, env: dict[str, str] | None = None) -> FakeContainer:
        with self._lock:
            self.requests.append(("add_container", service))
            if self.refuse is not None:
                raise self.refuse
            n = next(self._instances)
            c = FakeContainer(service, n, yarn_container_id=f"container_1_0001_01_{n + 2:06d}", env=dict(env or {}))
            self.containers[c.id] = c
            return c

    def kill_container(self, id: str) -> None:
        with self._lock:
            self.requests.append(("kill_container", id))
            c = self.containers[id]
            if c.state not in ("SUCCEEDED", "FAILED", "KILLED"):
                c.state, c.exit_message = "KILLED", "Killed by user request"

    def get_containers(
        self, services: Sequence[str] | None = None, states: Sequence[str] | None = None
    ) -> list[FakeContainer]:
        with self._lock:
            return [
                c
                for c in self.containers.values()
                if (services is None or c.service_name in services) and (states is None or c.state in states)
            ]

    def shutdown(self, status: str = "SUCCEEDED", diagnostics: str | None = None) -> None:
        self.shutdowns.append(status)
        if self.report is not None:
            self.report.state, self.report.final_status = "FINISHED", status
            self.report.diagnostics = diagnostics or ""

    # what YARN does to containers
    def set_state(self, container_id: str, state: str, exit_message: str = "") -> None:
        with self._lock:
            c = self.containers[container_id]
            c.state, c.exit_message = state, exit_message


@dataclass
class FakeReport:
    id: str
    state: str = "RUNNING"
    final_status: str = "UNDEFINED"
    diagnostics: str = ""
    name: str = "yarnflink session"
    queue: str = "default"
    tags: set[str] = field(default_factory=lambda: {"yarnflink"})
    tracking_url: str = ""


class FakeSkeinClient:
    """``skein.Client``: submit records the spec; the application's master "publishes" its REST
    address when ``publish`` is set."""

    def __init__(self, publish: str | None = "http://node1:8081") -> None:
        self.specs: list[Any] = []
        self.apps: dict[str, FakeReport] = {}
        self.app_clients: dict[str, FakeApplicationClient] = {}
        self.killed: list[str] = []
        self.publish = publish
        self.nodes = ["node1.example.com", "node2.example.com"]
        self._ids = itertools.count(1)

    def __call__(self, config: Any) -> FakeSkeinClient:  # usable as a client factory
        return self

    def submit(self, spec: Any) -> str:
        app_id = f"application_1700000000000_{next(self._ids):04d}"
        self.specs.append(spec)
        self.apps[app_id] = FakeReport(app_id, tags=set(spec.tags))
        ac = self.app_clients[app_id] = FakeApplicationClient()
        ac.report = self.apps[app_id]
        if self.publish:
            ac.kv["yarnflink.rest_url"] = self.publish.encode()
        return app_id

    def application_report(self, app_id: str) -> FakeReport:
        if app_id not in self.apps:
            raise ValueError(f"Application {app_id} not found")
        return self.apps[app_id]

    def connect(self, app_id: str, wait: bool = True, security: Any = None) -> FakeApplicationClient:
        return self.app_clients[app_id]

    def get_applications(self, states: Sequence[str] | None = None, **_: Any) -> list[FakeReport]:
        return [a for a in self.apps.values() if states is None or a.state in states]

    def get_nodes(self, states: Sequence[str] | None = None) -> list[Any]:
        return [type("Node", (), {"id": f"{h}:45454"})() for h in self.nodes]

    def kill_application(self, app_id: str, user: str = "") -> None:
        self.killed.append(app_id)
        self.apps[app_id].state = "KILLED"
