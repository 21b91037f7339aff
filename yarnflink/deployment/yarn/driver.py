"""YARN ResourceManagerDriver: TaskExecutors as containers of the ``taskexecutor`` skein service
(Flink's YarnResourceManagerDriver). It runs in the ApplicationMaster with an
``skein.ApplicationClient``.

``start_worker`` asks skein for a container (``add_container``, with the worker's resource id and the
ResourceManager's address in its environment); ``stop_worker`` releases it (``kill_container``).
A watcher thread polls ``get_containers`` and turns state changes into events: RUNNING is a started
worker; a live container no request of this driver asked for is killed (the service has
``max_restarts=0``: the ResourceManager alone replaces TaskExecutors); SUCCEEDED, FAILED or KILLED (a process that exited, a preempted container, a lost node) is
a terminated one, which the ResourceManager treats as a lost TaskExecutor (failover) or a failed
start; it asks for replacements itself, throttled by ``resourcemanager.start-worker.max-failure-rate``.
Blocking skein calls run on one worker thread, never on the ResourceManager's loop.
"""

from __future__ import annotations

import itertools
import logging
import threading
import uuid
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from yarnflink.deployment.yarn.spec import TASKEXECUTOR_SERVICE
from yarnflink.resourcemanager.driver import ResourceEventHandler
from yarnflink.resourcemanager.resources import WorkerSpec

log = logging.getLogger(__name__)

ACTIVE_STATES = ("WAITING", "REQUESTED", "RUNNING")
TERMINAL_STATES = ("SUCCEEDED", "FAILED", "KILLED")
ALL_STATES = ACTIVE_STATES + TERMINAL_STATES


class SkeinApplicationClient(Protocol):
    """The part of ``skein.ApplicationClient`` the driver uses (tests pass a fake)."""

    def add_container(self, service: str, env: dict[str, str] | None = None) -> Any: ...

    def kill_container(self, id: str) -> None: ...

    def get_containers(
        self, services: Sequence[str] | None = None, states: Sequence[str] | None = None
    ) -> list[Any]: ...


@dataclass(frozen=True)
class ContainerStarted:
    worker_id: str


@dataclass(frozen=True)
class ContainerEnded:
    worker_id: str
    diagnostics: str


@dataclass(frozen=True)
class KillUnknownContainer:
    """A live container of the service that no request of this driver asked for (e.g. one skein
    or an earlier attempt started): it would register under a worker id nobody tracks."""

    container_id: str


class ContainerTracker:
    """Pure: which container runs which worker, and what a snapshot of container states means.
    ``observe`` returns the events since the last snapshot."""

    def __init__(self) -> None:
        self.container_of: dict[str, str] = {}  # worker id -> skein container id ("taskexecutor_3")
        self.worker_of: dict[str, str] = {}
        self.started: set[str] = set()
        self.requested: set[str] = set()  # workers whose add_container has not answered yet
        self.killed_unknown: set[str] = set()  # unknown containers already told to go
        self.ended: set[str] = set()  # containers of ours already reported ended

    def assign(self, worker_id: str, container_id: str) -> None:
        self.container_of[worker_id] = container_id
        self.worker_of[container_id] = worker_id

    def forget(self, worker_id: str) -> None:
        cid = self.container_of.pop(worker_id, None)
        if cid is not None:
            self.worker_of.pop(cid, None)
            self.ended.add(cid)
        self.started.discard(worker_id)

    def observe(self, containers: Sequence[Any]) -> list[ContainerStarted | ContainerEnded | KillUnknownContainer]:
        """Events since the last snapshot; ``containers`` are the driver's service's only. A live
        container no request asked for is killed, unless a request is still unanswered (skein may
        have started its container before it told us the id)."""
        events: list[ContainerStarted | ContainerEnded | KillUnknownContainer] = []
        for c in containers:
            worker_id = self.worker_of.get(c.id)
            if worker_id is None:
                if (
                    str(c.state) in ACTIVE_STATES
                    and not self.requested
                    and c.id not in self.ended
                    and c.id not in self.killed_unknown
                ):
                    self.killed_unknown.add(c.id)
                    events.append(KillUnknownContainer(c.id))
                continue  # already reported, or told to go
            state = str(c.state)
            if state == "RUNNING" and worker_id not in self.started:
                self.started.add(worker_id)
                events.append(ContainerStarted(worker_id))
            elif state in TERMINAL_STATES:
                msg = getattr(c, "exit_message", "") or ""
                yid = getattr(c, "yarn_container_id", "") or c.id
                events.append(ContainerEnded(worker_id, f"YARN container {yid} {state}" + (f": {msg}" if msg else "")))
                self.forget(worker_id)
        return events


class YarnResourceManagerDriver:
    def __init__(
        self, app_client: SkeinApplicationClient, *, service: str = TASKEXECUTOR_SERVICE, poll_interval: float = 1.0
    ) -> None:
        self.app_client = app_client
        self.service = service
        self.poll_interval = poll_interval
        self.tracker = ContainerTracker()
        self._lock = threading.Lock()
        self._pending_stop: set[str] = set()  # stopped before skein answered the add_container
        self._handler: ResourceEventHandler | None = None
        self._rm_address = ""
        self._counter = itertools.count()
        self._stop = threading.Event()
        self._calls = ThreadPoolExecutor(1, thread_name_prefix="yarn-driver-skein")
        self._watcher: threading.Thread | None = None

    # ------------------------------------------------------------------ ResourceManagerDriver
    def initialize(self, handler: ResourceEventHandler, resource_manager_address: str) -> None:
        self._handler = handler
        self._rm_address = resource_manager_address
        self._watcher = threading.Thread(target=self._watch, name="yarn-driver-watcher", daemon=True)
        self._watcher.start()

    def start_worker(self, spec: WorkerSpec) -> str:
        worker_id = f"taskexecutor-{next(self._counter)}-{uuid.uuid4().hex[:6]}"
        env = {"YARNFLINK_RESOURCE_ID": worker_id, "YARNFLINK_RM_ADDRESS": self._rm_address}
        with self._lock:
            self.tracker.requested.add(worker_id)
        self._calls.submit(self._add_container, worker_id, env)
        return worker_id

    def stop_worker(self, worker_id: str) -> None:
        with self._lock:
            cid = self.tracker.container_of.get(worker_id)
            if cid is None:
                if worker_id in self.tracker.requested:  # killed once skein answers
                    self._pending_stop.add(worker_id)
                else:  # its container ended already, or was never ours: nothing to wait for
                    log.info("TaskExecutor %s has no live container to stop", worker_id)
                return
        self._calls.submit(self._kill, cid)  # the watcher reports its termination

    def terminate(self) -> None:
        self._stop.set()
        with self._lock:
            cids = list(self.tracker.container_of.values())
        futures = [self._calls.submit(self._kill, cid) for cid in cids]
        for f in futures:
            f.result()
        self._calls.shutdown(wait=True)

    # ------------------------------------------------------------------ internals
    def _add_container(self, worker_id: str, env: dict[str, str]) -> None:
        try:
            container = self.app_client.add_container(self.service, env=env)
        except Exception as e:  # a request skein refused is a failed start
            log.warning("YARN refused a TaskExecutor container: %s", e)
            with self._lock:
                self.tracker.requested.discard(worker_id)
                self._pending_stop.discard(worker_id)
            self._emit(ContainerEnded(worker_id, f"container request failed: {e}"))
            return
        with self._lock:
            self.tracker.requested.discard(worker_id)
            self.tracker.assign(worker_id, container.id)
            stop_now = worker_id in self._pending_stop
            self._pending_stop.discard(worker_id)
        log.info("requested YARN container %s for TaskExecutor %s", container.id, worker_id)
        if stop_now:
            self._kill(container.id)

    def _kill(self, container_id: str) -> None:
        try:
            self.app_client.kill_container(container_id)
        except Exception as e:  # already gone: the poll reports it
            log.info("killing container %s: %s", container_id, e)

    def poll_once(self) -> None:
        try:
            containers = self.app_client.get_containers(services=[self.service], states=list(ALL_STATES))
        except Exception as e:
            log.warning("cannot list YARN containers: %s", e)
            return
        with self._lock:
            events = self.tracker.observe(containers)
        for ev in events:
            if isinstance(ev, KillUnknownContainer):
                if self._stop.is_set():
                    continue
                log.warning(
                    "killing YARN container %s: no TaskExecutor request of this master started it", ev.container_id
                )
                self._calls.submit(self._kill, ev.container_id)
            else:
                self._emit(ev)

    def _emit(self, ev: ContainerStarted | ContainerEnded) -> None:
        if self._handler is None or self._stop.is_set():
            return
        if isinstance(ev, ContainerStarted):
            self._handler.on_worker_started(ev.worker_id)
        else:
            self._handler.on_worker_terminated(ev.worker_id, ev.diagnostics)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_interval):
            self.poll_once()


def wait_idle(driver: YarnResourceManagerDriver) -> None:
    """Tests: waits until every skein call submitted so far has run."""
    f: Future[None] = driver._calls.submit(lambda: None)
    f.result()
