"""Dispatcher: takes JobGraphs, starts one JobMaster per job, keeps finished jobs' archives, and
serves the REST API and dashboard (``yarnflink.dispatcher.rest``) on its own loop.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.common.config import ConfigOption, Configuration
from yarnflink.dispatcher.errors import DuplicateJobSubmission, UnknownJob
from yarnflink.dispatcher.leadership import NotLeader
from yarnflink.dispatcher.metric_fetcher import MetricFetcher
from yarnflink.dispatcher.monitoring import start_master_reporter
from yarnflink.dispatcher.rest import start_rest_server
from yarnflink.dispatcher.views import job_config_json, plan_json, with_metrics
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster.collect import CollectedSince, FrozenCollectLog
from yarnflink.jobmaster.gateway import JobMasterControlGateway
from yarnflink.jobmaster.local_gateway import LocalJobMasterGateway
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.jobmaster.submission import job_configuration
from yarnflink.jobmaster.views import job_archive, job_overview, savepoint_results
from yarnflink.metrics.options import MetricOptions
from yarnflink.metrics.prometheus import stop_reporter
from yarnflink.metrics.store import MetricStore, TaskMetricsEntry, merge_entries
from yarnflink.resourcemanager.gateway import ResourceManagerControlGateway
from yarnflink.resourcemanager.options import HeartbeatManagerOptions
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.rpc.endpoint import RpcEndpoint
from yarnflink.rpc.resolver import GatewayResolver
from yarnflink.security.options import SecurityOptions

if TYPE_CHECKING:  # loaded at the first job (_start_job_master) or by preload_job_master
    from yarnflink.jobmaster.jobmaster import JobMaster

log = logging.getLogger(__name__)

#: Loaded once the Dispatcher serves (``on_start``), or at the first job if that comes first.
JOB_MASTER_MODULE = "yarnflink.jobmaster.jobmaster"

#: How long an ended job's JobMaster runs on to free its slots before it is stopped.
JOB_MASTER_LINGER_S = 2.0


@dataclass
class JobEntry:
    job_id: str
    name: str
    submitted_ms: int
    master: JobMaster | None = None
    #: Snapshot taken when the job ended for good: details, exceptions, collected results.
    archive: dict[str, Any] | None = None
    terminated: asyncio.Event = field(default_factory=asyncio.Event)
    #: Flink's plan (vertices with their inputs) and the job's configuration, kept from submission
    plan: dict[str, Any] = field(default_factory=dict)
    job_config: dict[str, Any] = field(default_factory=dict)

    @property
    def gateway(self) -> JobMasterControlGateway | None:
        """How the Dispatcher reaches the job's JobMaster (None: not started, or ended)."""
        return LocalJobMasterGateway(self.master) if self.master is not None else None


class Dispatcher(RpcEndpoint):
    def __init__(
        self,
        config: Configuration,
        resource_manager: ResourceManagerControlGateway,
        *,
        rest_host: str,
        rest_port: int,
        on_shutdown_request: Callable[[], None] = lambda: None,
        gateways: GatewayResolver | None = None,
        job_master_gateways: Callable[[], GatewayResolver] | None = None,
    ) -> None:
        """``resource_manager``: the ResourceManager of this process (``LocalResourceManagerGateway``);
        its JobMasters register at its ``address``. ``gateways``: how it reaches TaskExecutors
        (metrics, logs); ``job_master_gateways`` makes each JobMaster's (a resolver belongs to one
        loop). Default: over gRPC."""
        super().__init__("Dispatcher")
        self.config = config
        self.resource_manager_gateway = resource_manager
        self.rest_host = rest_host
        self._rest_port_config = rest_port
        self.rest_port = 0
        self.jobs: dict[str, JobEntry] = {}
        #: the JobMasters of ended jobs until they are stopped (they answer savepoint queries until
        #: then); afterwards nothing here refers to an ended job's JobMaster: its archive has the rest
        self._ending: dict[str, JobMasterControlGateway] = {}
        self.on_shutdown_request = on_shutdown_request
        self._rest_server: Any = None
        self._server_task: asyncio.Task[Any] | None = None
        self.started_ms = int(time.time() * 1000)
        #: task and TaskExecutor metrics for the REST API and dashboard (yarnflink.metrics)
        self.metric_store = MetricStore()
        self.metric_fetcher: MetricFetcher | None = None
        self._gateways: GatewayResolver | None = gateways
        self._job_master_gateways = job_master_gateways
        self._metric_reporter: Any = None
        #: HA (yarnflink.dispatcher.leadership.DispatcherLeadership): None without HA
        self.leadership: Any = None

    @property
    def is_leader(self) -> bool:
        """Without HA always; with HA once this master leads and has recovered its jobs."""
        return self.leadership is None or self.leadership.accepting_session is not None

    @property
    def rest_url(self) -> str:
        scheme = "https" if self.config.get(SecurityOptions.SSL_REST_ENABLED) else "http"
        return f"{scheme}://{self.rest_host}:{self.rest_port}"

    async def on_start(self) -> None:
        if self._gateways is None:
            self._gateways = GrpcGatewayResolver()
        self.metric_fetcher = MetricFetcher(
            self.resource_manager_gateway,
            self.metric_store,
            self._gateways,
            self.config.get_seconds(MetricOptions.METRIC_FETCHER_UPDATE_INTERVAL) or 0.0,
        )
        self._rest_server, self._server_task, self.rest_port = await start_rest_server(
            self, self.rest_host, self._rest_port_config
        )
        self._metric_reporter = start_master_reporter(self)
        # serving: the JobMaster's modules load on a thread, so the first job does not wait for them
        asyncio.get_running_loop().run_in_executor(None, importlib.import_module, JOB_MASTER_MODULE)

    async def on_stop(self) -> None:
        masters = [e.master for e in self.jobs.values() if e.master is not None]
        loop = asyncio.get_running_loop()
        if self._metric_reporter is not None:
            await loop.run_in_executor(None, stop_reporter, self._metric_reporter)
        if self._gateways is not None:
            await self._gateways.close()
        for jm in masters:
            await loop.run_in_executor(None, jm.stop)
        if self._rest_server is not None:
            self._rest_server.should_exit = True
            if self._server_task is not None:
                try:
                    await asyncio.wait_for(self._server_task, 5)
                except (TimeoutError, asyncio.CancelledError):
                    pass

    # ------------------------------------------------------------------ jobs
    async def submit_job(self, job_graph: JobGraph) -> None:
        ha = self.leadership
        session = ha.require_leader() if ha is not None else None  # NotLeader: REST 503
        if job_graph.job_id in self.jobs:
            raise DuplicateJobSubmission(f"job {job_graph.job_id} was already submitted")
        if ha is not None and await ha.has_job_result(job_graph.job_id):
            raise DuplicateJobSubmission(f"job {job_graph.job_id} has already ended (it is in the job result store)")
        entry = JobEntry(
            job_graph.job_id,
            job_graph.job_name,
            int(time.time() * 1000),
            plan=plan_json(job_graph),
            job_config=job_config_json(job_graph, self.config.to_dict()),
        )
        self.jobs[job_graph.job_id] = entry
        try:
            if ha is not None:  # durable before the JobMaster starts: a new leader recovers it
                await ha.put_job_graph(job_graph, session)
            await self._start_job_master(entry, job_graph)
        except BaseException:
            # a JobMaster that could not start leaves no half-registered job behind
            self.jobs.pop(job_graph.job_id, None)
            if ha is not None and session is not None:  # nor a JobGraph for the next leader
                await ha.remove_job_graph(job_graph.job_id, session)
            raise
        log.info("submitted job %s (%s)", job_graph.job_name, job_graph.job_id)

    async def recover_job(self, job_graph: JobGraph, session_id: str) -> None:
        """HA: run a job that a former leader accepted (its JobGraph came from the JobGraphStore)."""
        if job_graph.job_id in self.jobs:
            return
        entry = JobEntry(
            job_graph.job_id,
            job_graph.job_name,
            int(time.time() * 1000),
            plan=plan_json(job_graph),
            job_config=job_config_json(job_graph, self.config.to_dict()),
        )
        self.jobs[job_graph.job_id] = entry
        try:
            # its tasks may still run at the TaskExecutors: the JobMaster adopts them (issue 18)
            await self._start_job_master(entry, job_graph, reconcile=True)
        except BaseException:
            self.jobs.pop(job_graph.job_id, None)
            raise
        log.info("recovered job %s (%s)", job_graph.job_name, job_graph.job_id)

    def fence_job_masters(self) -> None:
        """HA, from any thread, at once: every JobMaster refuses every RPC from now on."""
        for e in list(self.jobs.values()):
            if e.master is not None:
                e.master.jobmaster_id = ""

    def suspend_jobs(self, cause: str, timeout: float = 2.0) -> None:
        """HA, from any thread but the Dispatcher's own (the step-down thread): suspend every
        running JobMaster through its gateway (tasks cancelled, slots freed, the jobs' HA data
        kept: not a terminal state) and stop it, within about ``timeout``. The gateway calls run on
        the Dispatcher's loop (it still runs while the master steps down); if that loop is gone,
        the JobMasters are only stopped."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("suspend_jobs() blocks: call it from another thread than the Dispatcher's")
        masters = [e.master for e in list(self.jobs.values()) if e.master is not None]

        async def suspend_all() -> None:
            calls = [LocalJobMasterGateway(jm).suspend(cause, timeout) for jm in masters if not jm.loop.is_closed()]
            await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout + 0.5)

        if self.loop.is_running():
            try:
                self.call(suspend_all, timeout=timeout + 1.0)
            except Exception:  # noqa: BLE001 - the process is being replaced anyway
                log.debug("suspending the JobMasters did not finish", exc_info=True)
        else:
            log.warning("the Dispatcher runs no longer: its JobMasters are stopped without suspending them")
        for jm in masters:
            try:
                jm.stop(timeout=1.0)
            except Exception:  # noqa: BLE001 - the process is being replaced anyway
                log.debug("stopping JobMaster of job %s failed", jm.job_id, exc_info=True)

    async def _start_job_master(self, entry: JobEntry, job_graph: JobGraph, reconcile: bool = False) -> None:
        cfg = self.config
        ha_kwargs: dict[str, Any] = {}
        ha = self.leadership
        session: str | None = None
        if ha is not None:
            session = ha.state.session_id  # the current grant (recovering jobs: not yet accepting)
            if session is None:
                raise NotLeader(ha.leader_rest_url)
            try:
                retained = CheckpointConfig.from_configuration(job_configuration(cfg, job_graph)).num_retained
            except ValueError:  # the JobMaster below names the problem
                retained = 1
            ha_kwargs = {
                "jobmaster_id": session,  # fresh per leadership: the leader session id
                "checkpoint_ha": ha.checkpoint_recovery(job_graph.job_id, session, retained),
            }
        # deferred: the JobMaster's modules (scheduler, checkpointing, operators) are most of a master's
        # imports; a master serves REST first and loads them on a thread (preload_job_master)
        from yarnflink.jobmaster.jobmaster import JobMaster

        jm = JobMaster(
            job_graph,
            self.rest_host if self.rest_host not in ("0.0.0.0", "") else "127.0.0.1",
            self.resource_manager_gateway.address,
            on_terminated=lambda m: self._job_terminated_on_jm_loop(m),
            slot_request_timeout_s=_seconds(cfg, JobManagerOptions.SLOT_REQUEST_TIMEOUT),
            heartbeat_interval_s=_seconds(cfg, HeartbeatManagerOptions.HEARTBEAT_INTERVAL),
            heartbeat_timeout_s=_seconds(cfg, HeartbeatManagerOptions.HEARTBEAT_TIMEOUT),
            config=cfg,  # restart and failover strategies, slot.idle.timeout (the job's config wins)
            gateways=self._job_master_gateways() if self._job_master_gateways is not None else None,
            reconcile=reconcile and ha is not None,
            **ha_kwargs,
        )
        entry.master = jm
        await asyncio.get_running_loop().run_in_executor(None, jm.start)
        if ha is not None and session is not None:
            if ha.state.session_id != session:  # leadership ended while it started: it never acts
                jm.jobmaster_id = ""
                return
            await ha.publish_job_master(job_graph.job_id, session, jm.address)

    def _job_terminated_on_jm_loop(self, jm: JobMaster) -> None:
        """The JobMaster's notice that its job ended for good, on its loop (Flink's JobManagerRunner
        result): it hands its archive over to our loop, read there before anything else runs on it."""
        self.call_soon(self._job_terminated, jm.job_id, job_archive(jm))

    def _job_terminated(self, job_id: str, archive: dict[str, Any]) -> None:
        entry = self.jobs.get(job_id)
        if entry is None:
            return
        archive["metrics"] = merge_entries(self.metric_store.job_tasks(job_id), archive["finals"])
        self.metric_store.drop_job(job_id)
        if self.metric_fetcher is not None:
            self.metric_fetcher.ended_jobs.add(job_id)
        entry.archive = archive
        jm, entry.master = entry.master, None
        entry.terminated.set()
        if self.leadership is not None:  # HA: job result store, then the job's HA data goes
            details = archive["details"]
            exc = archive["exceptions"]
            self.leadership.job_ended(
                job_id,
                str(details.get("state")),
                int(details.get("duration") or 0),
                str(exc.get("root-exception") or "") or None,
            )
        if jm is not None:
            self._ending[job_id] = LocalJobMasterGateway(jm)
            asyncio.ensure_future(self._stop_ended_job_master(entry, jm))

    async def _stop_ended_job_master(self, entry: JobEntry, jm: JobMaster) -> None:
        """Gives the JobMaster of an ended job a moment to free its slots, then stops it and lets
        go of it: what reached it meanwhile (final task metrics, the result of a savepoint that was
        being written when the job ended) joins the archive, and no reference to it stays here."""
        await asyncio.sleep(JOB_MASTER_LINGER_S)
        try:
            await self._archive_late_results(entry, LocalJobMasterGateway(jm))
        finally:
            # from here on savepoint queries read the archive, never a JobMaster that is stopping
            self._ending.pop(entry.job_id, None)
        await asyncio.get_running_loop().run_in_executor(None, jm.stop)
        if entry.archive is not None and jm.loop.is_closed():  # its thread has ended: its state is final
            entry.archive["savepoints"] = savepoint_results(jm)

    async def _archive_late_results(self, entry: JobEntry, gateway: JobMasterControlGateway) -> None:
        """Final task metrics that reached the JobMaster after the job ended (a task that finished
        while it was being cancelled) and the savepoints' latest results join the archive."""
        try:
            snap = await gateway.request_monitoring_snapshot()
        except Exception:  # noqa: BLE001 - the archive keeps what it has
            log.debug("late results of job %s not read", entry.job_id, exc_info=True)
            return
        if entry.archive is not None:
            entry.archive["savepoints"] = snap["savepoints"]
            if snap["finals"]:
                entry.archive["metrics"] = merge_entries(entry.archive["metrics"].values(), snap["finals"])

    def entry(self, job_id: str) -> JobEntry:
        e = self.jobs.get(job_id)
        if e is None:
            raise UnknownJob(job_id)
        return e

    async def job_details(self, job_id: str) -> dict[str, Any]:
        e = self.entry(job_id)
        if e.archive is not None:
            return dict(e.archive["details"])
        gateway = e.gateway
        if gateway is None:  # submitted, its JobGraph being stored / JobMaster starting: not visible yet
            raise UnknownJob(job_id)
        return await gateway.request_job_details()

    async def job_collected(self, job_id: str, offset: int) -> tuple[CollectedSince, bool]:
        """``execute_and_collect()`` results after ``offset``, and whether the job has ended
        (then nothing more will come)."""
        e = self.entry(job_id)
        if e.archive is not None:
            log = e.archive.get("collect_log") or FrozenCollectLog(list(e.archive.get("collected", [])))
            return log.since(offset), True
        gateway = e.gateway
        if gateway is None:  # not started yet: nothing collected
            return CollectedSince([], 0, False), False
        return await gateway.request_collected(offset), False

    async def job_exceptions(self, job_id: str) -> dict[str, Any]:
        e = self.entry(job_id)
        if e.archive is not None:
            return dict(e.archive["exceptions"])
        gateway = e.gateway
        assert gateway is not None
        return await gateway.request_job_exceptions()

    async def trigger_savepoint(
        self,
        job_id: str,
        target_directory: str | None,
        *,
        stop: bool = False,
        drain: bool = False,
        cancel_job: bool = False,
    ) -> str | None:
        """The savepoint's trigger id; None if the job runs no longer or has no checkpointing
        (savepoints: yarnflink/jobmaster/checkpointing.py). ``stop``: stop-with-savepoint (the
        job ends FINISHED; ``drain``: MAX_WATERMARK first); ``cancel_job``: cancel-with-savepoint
        (the job is cancelled once the savepoint completed)."""
        e = self.entry(job_id)
        gateway = e.gateway
        if e.archive is not None or gateway is None:
            return None
        return await gateway.trigger_savepoint(target_directory, stop=stop, drain=drain, cancel_job=cancel_job)

    async def savepoint_status(self, job_id: str, trigger_id: str) -> dict[str, Any] | None:
        """The savepoint's result: asked of the JobMaster while it runs (also in the moment an
        ended job's JobMaster runs on), then read from the job's archive (stop-with-savepoint
        ends the job, and its client polls the result after that)."""
        e = self.entry(job_id)
        gateway = e.gateway or self._ending.get(job_id)
        if gateway is not None:
            return await gateway.request_savepoint_status(trigger_id)
        if e.archive is None:
            return None
        result = e.archive.get("savepoints", {}).get(trigger_id)
        return dict(result) if result is not None else None

    async def cancel_job(self, job_id: str) -> bool:
        e = self.entry(job_id)
        gateway = e.gateway
        if e.archive is not None or gateway is None:
            return False
        return await gateway.cancel()

    async def overviews(self) -> list[dict[str, Any]]:
        out = []
        for job_id in list(self.jobs):
            try:
                out.append(job_overview(await self.job_details(job_id)))
            except UnknownJob:
                continue
        return out

    # ------------------------------------------------------------------ monitoring (dashboard, metrics)
    async def job_monitoring(self, job_id: str) -> dict[str, Any]:
        """Details, task metrics (newest per subtask), checkpoint statistics and restarts of a job;
        a running job's task metrics are fetched first (at most once per update interval)."""
        e = self.entry(job_id)
        if e.archive is None and self.metric_fetcher is not None:
            await self.metric_fetcher.update()
        if e.archive is not None:
            return {
                "details": e.archive["details"],
                "metrics": e.archive["metrics"],
                "checkpoints": e.archive["checkpoints"],
                "num_restarts": e.archive["num_restarts"],
            }
        gateway = e.gateway
        assert gateway is not None
        snap = await gateway.request_monitoring_snapshot()
        live: list[TaskMetricsEntry] = self.metric_store.job_tasks(job_id)
        snap["metrics"] = merge_entries(live, snap.pop("finals"))
        return snap

    async def job_details_with_metrics(self, job_id: str) -> dict[str, Any]:
        snap = await self.job_monitoring(job_id)
        return with_metrics(snap["details"], snap["metrics"], self.entry(job_id).plan)


def _seconds(config: Configuration, option: ConfigOption) -> float:
    """A duration option that has a default, in seconds."""
    seconds = config.get_seconds(option)
    assert seconds is not None, f"{option.key} has a default"
    return seconds
