"""The master process's part in the leader election (``high-availability.type: zookeeper``): the
driver of the pure ``MasterLeadership`` (``recovery.py``). It registers the process's components
in its one election, turns grants and revocations into events, and carries out the actions:
fencing the ResourceManager, recovering jobs from the HA stores on the Dispatcher's loop,
publishing addresses, cleaning up the HA data of jobs that ended for good, and stepping down.

Threads: election callbacks come on the election service's loop and must not block. Fencing is
done right there (an attribute assignment each: the ResourceManager's token and every JobMaster's
id become empty, so every RPC to them is refused from that moment); store I/O runs in the
Dispatcher loop's executor; the step-down (suspending JobMasters, replacing the process) runs on
its own thread.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.coordinator import discards_on
from yarnflink.checkpoint.storage import discard_checkpoint_at, storage_options_from_config
from yarnflink.dispatcher.recovery import (
    AcceptJobs,
    Action,
    CleanupJob,
    Closing,
    FenceResourceManager,
    Granted,
    JobEnded,
    MasterLeadership,
    ReadRecoveryPlan,
    RecoverJob,
    RecoveryFailed,
    RecoveryRead,
    Revoked,
    StepDown,
    SuspendJobs,
)
from yarnflink.highavailability.checkpoints import JobCheckpointRecovery
from yarnflink.highavailability.election_service import LeaderElectionHandle, LeaderElectionService
from yarnflink.highavailability.errors import HaStoreError, HighAvailabilityError
from yarnflink.highavailability.leaderelection import ConnectionState
from yarnflink.highavailability.leaderretrieval import LeaderRetrievalService
from yarnflink.highavailability.services import (
    DISPATCHER,
    RESOURCE_MANAGER,
    REST_SERVER,
    HighAvailabilityServices,
    job_master_component,
)
from yarnflink.highavailability.stores import recover_jobs
from yarnflink.jobmaster.submission import job_configuration

if TYPE_CHECKING:
    from yarnflink.dispatcher.dispatcher import Dispatcher
    from yarnflink.jobgraph.jobgraph import JobGraph
    from yarnflink.resourcemanager.resourcemanager import ResourceManager

log = logging.getLogger(__name__)

__all__ = ["DispatcherLeadership", "NotLeader"]


class NotLeader(Exception):
    """This master does not lead (or has not finished recovering): the REST API answers 503."""

    def __init__(self, leader_rest_url: str | None) -> None:
        where = f"; the leader's REST endpoint is {leader_rest_url}" if leader_rest_url else "; no leader is known yet"
        super().__init__(f"this master is not the leader{where}")
        self.leader_rest_url = leader_rest_url


#: What a JobMaster imports on first use (about 0.4 s): a standby imports it before it is granted,
#: so a takeover does not wait for it.
_JOB_MASTER_MODULES = (
    "yarnflink.taskexecutor.task",
    "yarnflink.jobmaster.checkpointing",
    "yarnflink.checkpoint.storage",
    "yarnflink.checkpoint.config",
    "yarnflink.jobmaster.rm_connection",
)


def _warm_up() -> None:
    for name in _JOB_MASTER_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the JobMaster reports it when it needs the module
            log.debug("warming up %s failed", name, exc_info=True)


class _Component:
    """A component's contender: the process contender decides for all of them."""

    def __init__(
        self, on_grant: Callable[[str], None] = lambda s: None, on_revoke: Callable[[], None] = lambda: None
    ) -> None:
        self._on_grant = on_grant
        self._on_revoke = on_revoke

    def grant_leadership(self, session_id: str) -> None:
        self._on_grant(session_id)

    def revoke_leadership(self) -> None:
        self._on_revoke()


class DispatcherLeadership:
    def __init__(
        self,
        ha: HighAvailabilityServices,
        dispatcher: Dispatcher,
        rm: ResourceManager,
        *,
        step_down: Callable[[str], None],
    ) -> None:
        self.ha = ha
        self.dispatcher = dispatcher
        self.rm = rm
        self._step_down = step_down
        self.state = MasterLeadership()
        self._lock = threading.Lock()
        self.election: LeaderElectionService | None = None
        self._handles: dict[str, LeaderElectionHandle] = {}
        self._job_handles: dict[str, LeaderElectionHandle] = {}
        self._rest_leader: LeaderRetrievalService | None = None
        #: The session id under which jobs are accepted (None: not leading or still recovering).
        self.accepting_session: str | None = None
        self._step_down_thread: threading.Thread | None = None
        self._granted_at = 0.0

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> DispatcherLeadership:
        """Joins the election (the endpoints must serve already: a grant may come at once)."""
        threading.Thread(target=_warm_up, name="warm-up", daemon=True).start()
        self._rest_leader = self.ha.rest_endpoint_leader_retriever().start()
        self.election = self.ha.leader_election_service()
        # the process contender last: when it is granted, the others are contenders already
        for component in (RESOURCE_MANAGER, REST_SERVER):
            self._handles[component] = handle = self.election.create_leader_election(component)
            handle.start(_Component())
        self._handles[DISPATCHER] = handle = self.election.create_leader_election(DISPATCHER)
        handle.start(_Component(self._granted, self._revoked))
        return self

    def close(self) -> None:
        """An orderly shutdown: revocations from now on only fence; the HA data stays."""
        self._handle(Closing())
        if self._rest_leader is not None:
            self._rest_leader.stop()

    # ------------------------------------------------------------------ queries (any thread)
    @property
    def leader_rest_url(self) -> str | None:
        info = self._rest_leader.current() if self._rest_leader is not None else None
        return info.address if info is not None else None

    def require_leader(self) -> str:
        session = self.accepting_session
        if session is None:
            raise NotLeader(self.leader_rest_url)
        return session

    # ------------------------------------------------------------------ election callbacks (election loop)
    def _granted(self, session_id: str) -> None:
        self._granted_at = time.monotonic()
        self._handle(Granted(session_id))

    def _revoked(self) -> None:
        self._handle(Revoked(self._revocation_reason()))

    def _revocation_reason(self) -> str:
        election = getattr(self.election, "_election", None)  # read on the election's own loop
        if election is None:
            return "leadership revoked"
        if election.closed:
            return "the leader election was closed"
        if election.connection is ConnectionState.LOST:
            return "ZooKeeper session LOST"
        if election.connection is ConnectionState.SUSPENDED:
            return "ZooKeeper connection SUSPENDED"
        if election.lease_expired:
            return "ZooKeeper lease expired (no answer for 2/3 of the session timeout)"
        return "leader latch released"

    # ------------------------------------------------------------------ events -> actions
    def job_ended(self, job_id: str, status: str, net_runtime_ms: int = 0, failure_cause: str | None = None) -> None:
        self._handle(JobEnded(job_id, status, net_runtime_ms, failure_cause))

    def _handle(self, event: Any) -> None:
        with self._lock:
            actions = self.state.handle(event)
        if actions:
            log.debug("leadership: %s -> %s", event, actions)
        self._execute(actions)

    def _execute(self, actions: list[Action]) -> None:
        later: list[Action] = []
        for a in actions:
            if isinstance(a, FenceResourceManager):
                if a.token:
                    self.rm.grant_leadership(a.token)
                    self._handles[RESOURCE_MANAGER].confirm_leadership(a.token, self.rm.address)
                else:
                    self.accepting_session = None
                    self.rm.revoke_leadership()
            elif isinstance(a, SuspendJobs):
                self.accepting_session = None
                self.dispatcher.fence_job_masters()  # now; stopping them follows on the step-down thread
            elif isinstance(a, StepDown):
                self._start_step_down(a.reason)
            else:
                later.append(a)
        if later:
            self.dispatcher.call_soon(self._spawn_async, later)

    def _start_step_down(self, reason: str) -> None:
        if self._step_down_thread is None:
            self._step_down_thread = threading.Thread(
                target=self._step_down, args=(reason,), name="step-down", daemon=True
            )
            self._step_down_thread.start()

    def _spawn_async(self, actions: list[Action]) -> None:
        asyncio.ensure_future(self._run_async(actions))

    async def _run_async(self, actions: list[Action]) -> None:
        """Recovery and cleanups at once, then (recovery done) accepting jobs."""
        first = [a for a in actions if not isinstance(a, AcceptJobs)]
        results = await asyncio.gather(*(self._run_one(a) for a in first), return_exceptions=True)
        for done, r in zip(first, results):
            if isinstance(r, BaseException):
                log.error("%s failed: %s", done, r, exc_info=r)
        for accept in actions:
            if isinstance(accept, AcceptJobs):
                await self._accept_jobs(accept.session_id)

    async def _run_one(self, a: Action) -> None:
        if isinstance(a, ReadRecoveryPlan):
            await self._read_plan(a.session_id)
        elif isinstance(a, RecoverJob):
            await self._recover(a.job_id, a.session_id)
        elif isinstance(a, CleanupJob):
            await self._cleanup(a)

    async def _off_loop(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    # ------------------------------------------------------------------ recovery
    def _fence(self, session_id: str) -> Any:
        assert self.election is not None
        return self.election.fence(session_id)  # LeadershipLostError if that grant is over

    async def _read_plan(self, session_id: str) -> None:
        try:
            fence = self._fence(session_id)
            plan = await self._off_loop(recover_jobs, self.ha.job_graph_store(fence), self.ha.job_result_store())
        except Exception as e:  # noqa: BLE001 - a new process tries again
            self._handle(RecoveryFailed(session_id, f"{type(e).__name__}: {e}"))
            return
        if plan.jobs_to_recover or plan.dirty_results or plan.stale_job_graphs:
            log.info(
                "leader session %s: recovering jobs %s, cleaning up %s",
                session_id,
                list(plan.jobs_to_recover),
                [r.job_id for r in plan.dirty_results] + list(plan.stale_job_graphs),
            )
        self._handle(RecoveryRead(session_id, plan))

    async def _recover(self, job_id: str, session_id: str) -> None:
        try:
            fence = self._fence(session_id)
            graph = await self._off_loop(self.ha.job_graph_store(fence).recover_job_graph, job_id)
        except HaStoreError as e:  # this job's data is damaged: the others still run (no restart loop)
            log.error("job %s cannot be recovered: %s", job_id, e)
            return
        except Exception as e:  # noqa: BLE001 - ZooKeeper away, leadership over: a new process tries again
            self._handle(RecoveryFailed(session_id, f"reading the JobGraph of job {job_id}: {e}"))
            return
        if graph is None:
            log.warning("job %s: its JobGraph disappeared before it could be recovered", job_id)
            return
        await self.dispatcher.recover_job(graph, session_id)

    async def _accept_jobs(self, session_id: str) -> None:
        if self.election is None or not self.election.has_leadership(session_id):
            return
        self.accepting_session = session_id
        url = self.dispatcher.rest_url
        self._handles[DISPATCHER].confirm_leadership(session_id, url)
        self._handles[REST_SERVER].confirm_leadership(session_id, url)
        log.info(
            "leading as session %s: ResourceManager %s, REST %s, %d job(s) recovered %.0f ms after the grant",
            session_id,
            self.rm.address,
            url,
            len(self.dispatcher.jobs),
            (time.monotonic() - self._granted_at) * 1000,
        )

    # ------------------------------------------------------------------ per job (Dispatcher loop)
    async def put_job_graph(self, graph: JobGraph, session_id: str) -> None:
        await self._off_loop(self.ha.job_graph_store(self._fence(session_id)).put_job_graph, graph)

    async def remove_job_graph(self, job_id: str, session_id: str) -> None:
        """A submission that failed: its JobGraph must not be recovered."""
        try:
            await self._off_loop(self.ha.job_graph_store(self._fence(session_id)).global_cleanup, job_id)
        except Exception as e:  # noqa: BLE001
            log.warning("job %s: removing the JobGraph of a failed submission failed: %s", job_id, e)

    async def has_job_result(self, job_id: str) -> bool:
        return bool(await self._off_loop(self.ha.job_result_store().has_job_result_entry, job_id))

    def checkpoint_recovery(self, job_id: str, session_id: str, max_retained: int) -> JobCheckpointRecovery:
        fence = self._fence(session_id)
        return JobCheckpointRecovery(
            self.ha.checkpoint_id_counter(job_id, fence),
            self.ha.completed_checkpoint_pointer_store(job_id, max(1, max_retained), fence),
        )

    async def publish_job_master(self, job_id: str, session_id: str, address: str) -> None:
        """The JobMaster leads its job under ``session_id`` at ``address`` (its gRPC endpoint)."""

        def register() -> None:
            assert self.election is not None
            entry = self.dispatcher.jobs.get(job_id)
            if job_id in self._job_handles or entry is None or entry.archive is not None:
                return  # published already, or the job ended meanwhile (its cleanup withdraws nothing)
            handle = self.election.create_leader_election(job_master_component(job_id))
            handle.start(_Component())
            self._job_handles[job_id] = handle
            handle.confirm_leadership(session_id, address)

        try:
            await self._off_loop(register)
        except Exception as e:  # noqa: BLE001 - the TaskExecutors learn the address from slot requests too
            log.warning("publishing the JobMaster of job %s failed: %s", job_id, e)

    def _ended_checkpoints(self, a: CleanupJob, fence: Any) -> list[tuple[str, dict[str, Any]]]:
        """The completed checkpoints (pointer, storage options) of a job that ended for good that
        its retention policy deletes with its HA data (the JobMaster leaves them: a leader
        deposed before the job's result is recorded must leave them to the next one)."""
        status = a.result.job_status if a.result is not None else None
        if status is None:
            status = next(
                (r.job_status for r in self.ha.job_result_store().get_dirty_results() if r.job_id == a.job_id), None
            )
        pointers = self.ha.completed_checkpoint_pointer_store(a.job_id).get_all()
        if status is None or not pointers:
            return []
        try:
            graph = self.ha.job_graph_store(fence).recover_job_graph(a.job_id)
        except HaStoreError as e:
            log.warning("job %s: its checkpoints are kept (its JobGraph cannot be read: %s)", a.job_id, e)
            return []
        if graph is None:
            return []
        try:
            config = job_configuration(self.dispatcher.config, graph)
            retention = CheckpointConfig.from_configuration(config).externalized_retention
        except ValueError as e:
            log.warning("job %s: its checkpoints are kept (%s)", a.job_id, e)
            return []
        if not discards_on(retention, status):
            return []
        return [(pointer, storage_options_from_config(config, pointer)) for _, pointer in pointers]

    async def _cleanup(self, a: CleanupJob) -> None:
        def run() -> None:
            handle = self._job_handles.pop(a.job_id, None)
            if handle is not None:
                handle.close()  # withdraws the JobMaster's leader information
            fence = self._fence(a.session_id)
            results = self.ha.job_result_store()
            # the job result store's writes are not fenced: first a fenced check that this master
            # still leads (a leader frozen past its session must not record an end for a job the
            # next leader runs: a later leader would then clean up its checkpoints, and never run it)
            self.ha.completed_checkpoint_pointer_store(a.job_id, 1, fence).check_leadership()
            if a.result is not None and not results.has_job_result_entry(a.job_id):
                results.create_dirty_result(a.result)
            checkpoints = self._ended_checkpoints(a, fence)  # read before their pointers go
            self.ha.global_cleanup(a.job_id, fence)
            # the pointers are gone (a fenced write): now their files may go (Flink's
            # CheckpointResourcesCleanupRunner); a deposed leader never gets here
            for pointer, options in checkpoints:
                try:
                    discard_checkpoint_at(pointer, options, with_shared=True)
                except Exception as e:  # noqa: BLE001 - left behind, never restored again
                    log.warning("job %s: deleting checkpoint %s failed: %s", a.job_id, pointer, e)
            self.ha.job_graph_store(fence).global_cleanup(a.job_id)
            if results.has_dirty_job_result_entry(a.job_id):
                results.mark_result_as_clean(a.job_id)

        try:
            await self._off_loop(run)
            log.info("job %s: HA data removed", a.job_id)
        except HighAvailabilityError as e:
            log.warning("job %s: cleaning up its HA data failed (%s); the next leader finishes it", a.job_id, e)
