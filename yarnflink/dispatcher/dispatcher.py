"""Dispatcher: takes JobGraphs, starts one JobMaster per job, keeps finished jobs' archives, and
serves the REST API and dashboard (``yarnflink.dispatcher.rest``) on its own loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from yarnflink.common.config import Configuration
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.jobmaster.views import exceptions_json, job_overview
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.rpc.endpoint import RpcEndpoint

log = logging.getLogger(__name__)


class DuplicateJobSubmission(Exception):
    pass


class UnknownJob(KeyError):
    pass


@dataclass
class JobEntry:
    job_id: str
    name: str
    submitted_ms: int
    master: Optional[JobMaster] = None
    #: Snapshot taken when the job ended for good: details, exceptions, collected results.
    archive: Optional[dict[str, Any]] = None
    terminated: asyncio.Event = field(default_factory=asyncio.Event)


class Dispatcher(RpcEndpoint):
    def __init__(self, config: Configuration, resource_manager: ResourceManager, *,
                 rest_host: str, rest_port: int, on_shutdown_request: Callable[[], None] = lambda: None) -> None:
        super().__init__("Dispatcher")
        self.config = config
        self.rm = resource_manager
        self.rest_host = rest_host
        self._rest_port_config = rest_port
        self.rest_port = 0
        self.jobs: dict[str, JobEntry] = {}
        self.on_shutdown_request = on_shutdown_request
        self._rest_server: Any = None
        self._server_task: Optional[asyncio.Task[Any]] = None
        self.started_ms = int(time.time() * 1000)

    @property
    def rest_url(self) -> str:
        return f"http://{self.rest_host}:{self.rest_port}"

    async def on_start(self) -> None:
        from yarnflink.dispatcher.rest import start_rest_server

        self._rest_server, self._server_task, self.rest_port = await start_rest_server(
            self, self.rest_host, self._rest_port_config)

    async def on_stop(self) -> None:
        masters = [e.master for e in self.jobs.values() if e.master is not None]
        loop = asyncio.get_running_loop()
        for jm in masters:
            await loop.run_in_executor(None, jm.stop)
        if self._rest_server is not None:
            self._rest_server.should_exit = True
            if self._server_task is not None:
                try:
                    await asyncio.wait_for(self._server_task, 5)
                except (asyncio.TimeoutError, asyncio.CancelledError):
                    pass

    # ------------------------------------------------------------------ jobs
    async def submit_job(self, job_graph: JobGraph) -> None:
        if job_graph.job_id in self.jobs:
            raise DuplicateJobSubmission(f"job {job_graph.job_id} was already submitted")
        entry = JobEntry(job_graph.job_id, job_graph.job_name, int(time.time() * 1000))
        self.jobs[job_graph.job_id] = entry
        cfg = self.config
        jm = JobMaster(
            job_graph, self.rest_host if self.rest_host not in ("0.0.0.0", "") else "127.0.0.1",
            self.rm.address,
            on_terminated=lambda m: self._job_terminated_on_jm_loop(m),
            slot_request_timeout_s=cfg.get_seconds("slot.request.timeout"),
            heartbeat_interval_s=cfg.get_seconds("heartbeat.interval"),
            heartbeat_timeout_s=cfg.get_seconds("heartbeat.timeout"),
        )
        entry.master = jm
        await asyncio.get_running_loop().run_in_executor(None, jm.start)
        log.info("submitted job %s (%s)", job_graph.job_name, job_graph.job_id)

    def _job_terminated_on_jm_loop(self, jm: JobMaster) -> None:
        """Called on the JobMaster's loop: snapshot there, then hand over to our loop."""
        archive = {
            "details": jm.details(),
            "exceptions": exceptions_json(jm.eg),
            "collected": jm.collected_payloads(),
        }
        self.call_soon(self._job_terminated, jm.job_id, archive)

    def _job_terminated(self, job_id: str, archive: dict[str, Any]) -> None:
        entry = self.jobs.get(job_id)
        if entry is None:
            return
        entry.archive = archive
        jm, entry.master = entry.master, None
        entry.terminated.set()
        if jm is not None:
            # give the JobMaster a moment to free its slots, then stop its thread
            async def stop_later() -> None:
                await asyncio.sleep(2.0)
                await asyncio.get_running_loop().run_in_executor(None, jm.stop)

            asyncio.ensure_future(stop_later())

    def entry(self, job_id: str) -> JobEntry:
        e = self.jobs.get(job_id)
        if e is None:
            raise UnknownJob(job_id)
        return e

    async def job_details(self, job_id: str) -> dict[str, Any]:
        e = self.entry(job_id)
        if e.archive is not None:
            return dict(e.archive["details"])
        jm = e.master
        assert jm is not None
        return await jm.call_async(_as_coro(jm.details))

    async def job_exceptions(self, job_id: str) -> dict[str, Any]:
        e = self.entry(job_id)
        if e.archive is not None:
            return dict(e.archive["exceptions"])
        jm = e.master
        assert jm is not None
        return await jm.call_async(_as_coro(lambda: exceptions_json(jm.eg)))

    async def cancel_job(self, job_id: str) -> bool:
        e = self.entry(job_id)
        if e.archive is not None or e.master is None:
            return False
        jm = e.master
        return await jm.call_async(_as_coro(jm.cancel))

    async def overviews(self) -> list[dict[str, Any]]:
        out = []
        for job_id in list(self.jobs):
            try:
                out.append(job_overview(await self.job_details(job_id)))
            except UnknownJob:
                continue
        return out


def _as_coro(fn: Callable[[], Any]) -> Callable[[], Any]:
    async def run() -> Any:
        return fn()

    return run
