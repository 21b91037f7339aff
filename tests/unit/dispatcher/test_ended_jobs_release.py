"""Ended jobs let go of their JobMaster (issue 16, point 9): a session that runs many short jobs,
each with a savepoint, keeps no JobMaster, CheckpointDriver, thread or open event loop of an
ended job, while every savepoint's result stays readable from the job's archive.

A real master (ResourceManager, Dispatcher with its REST server, a JobMaster per job) and one
TaskExecutor run in this process on loopback; jobs are handed to the Dispatcher directly. Half of
the jobs are stopped with a savepoint (which ends them), the other half take a savepoint and are
then cancelled. The ResourceManager (requirements, heartbeats) and the Dispatcher's metric store
keep nothing of the ended jobs either; with HA (``EmbeddedHaServices``) their HA data and published
JobMaster addresses are gone too."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from yarnflink.api.connectors import DiscardingSink
from yarnflink.api.environment import StreamExecutionEnvironment
from yarnflink.common.config import Configuration
from yarnflink.dispatcher.dispatcher import Dispatcher, UnknownJob
from yarnflink.entrypoint.master import MasterProcess
from yarnflink.highavailability import EmbeddedHaServices
from yarnflink.highavailability.services import job_master_component
from yarnflink.jobgraph.jobgraph import JobGraph
from yarnflink.jobmaster.checkpointing import CheckpointDriver
from yarnflink.jobmaster.jobmaster import JobMaster
from yarnflink.taskexecutor.taskexecutor import TaskExecutor

pytestmark = pytest.mark.timeout(240)

JOBS = 200
#: threads and open event loops a session may have beyond those it had before the jobs ran (the
#: executor threads of the components that keep running, started on demand)
SLACK = 8


def _until(cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Session:
    """A session cluster in this process: a master (with ``ha`` if given) and one TaskExecutor."""

    def __init__(self, ha: EmbeddedHaServices | None) -> None:
        config = Configuration(
            {
                "rest.port": "0",
                "jobmanager.rpc.port": "0",
                "security.rest.authentication": "none",
                "security.ssl.internal.enabled": "false",
                "heartbeat.interval": "1 s",
            }
        )
        self.ha = ha
        self.master = MasterProcess(config, ha_services=ha)
        self.master.start()
        if ha is not None:
            ha.grant_leadership()
            _until(lambda: self.master.dispatcher.is_leader, what="leadership")
        self.te = TaskExecutor(self.master.rm.address, num_slots=2, heartbeat_interval_s=1.0)
        self.te.start()

    @property
    def dispatcher(self) -> Dispatcher:
        return self.master.dispatcher

    def on_dispatcher(self, fn: Callable[[], Any]) -> Any:
        async def run() -> Any:
            return await fn()

        return self.dispatcher.call(run)

    def stop(self) -> None:
        self.te.stop()
        self.master.stop()


@pytest.fixture(params=["session", "ha-session"])
def session(request: pytest.FixtureRequest) -> Iterator[Session]:
    s = Session(EmbeddedHaServices() if request.param == "ha-session" else None)
    yield s
    s.stop()


def _job(n: int) -> JobGraph:
    """A source that runs until stopped, into a sink; checkpoints only on request (savepoints)."""
    env = StreamExecutionEnvironment()
    env.get_config().set("execution.checkpointing.interval", "1 h")
    env.from_sequence(0, 10**15).set_parallelism(1).uid("source").sink_to(DiscardingSink()).set_parallelism(1)
    return env.get_job_graph(f"short job {n}")


def _run_with_savepoint(s: Session, n: int, savepoints: Path) -> tuple[str, str]:
    """Runs job ``n`` until it ended after a savepoint; returns (job id, trigger id)."""
    jg = _job(n)
    d = s.dispatcher
    s.on_dispatcher(lambda: d.submit_job(jg))

    async def running() -> bool:
        try:
            details = await d.job_details(jg.job_id)
        except UnknownJob:
            return False
        return details["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in details["vertices"])

    _until(lambda: s.on_dispatcher(running), what=f"job {n} running")
    stop = n % 2 == 0
    trigger_id = s.on_dispatcher(lambda: d.trigger_savepoint(jg.job_id, str(savepoints), stop=stop))
    assert trigger_id is not None
    if not stop:
        _until(
            lambda: (
                (s.on_dispatcher(lambda: d.savepoint_status(jg.job_id, trigger_id)) or {}).get("status", {}).get("id")
                == "COMPLETED"
            ),
            what=f"the savepoint of job {n}",
        )
        assert s.on_dispatcher(lambda: d.cancel_job(jg.job_id))

    async def ended() -> bool:
        return d.entry(jg.job_id).archive is not None

    _until(lambda: s.on_dispatcher(ended), what=f"job {n} ended")
    return jg.job_id, trigger_id


def _live(cls: type, job_ids: set[str]) -> list[Any]:
    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, cls) and _job_id_of(o) in job_ids]


def _job_id_of(o: Any) -> str:
    return str(o.job_id) if isinstance(o, JobMaster) else str(o.jm.job_id)


def _open_loops() -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop) and not o.is_closed())


def test_a_session_keeps_nothing_of_its_ended_jobs_but_their_archives(session: Session, tmp_path: Path) -> None:
    s = session
    _run_with_savepoint(s, -1, tmp_path)  # warm up: executors of the master and TaskExecutor started
    gc.collect()
    threads_before, loops_before = threading.active_count(), _open_loops()

    ended = dict(_run_with_savepoint(s, n, tmp_path) for n in range(JOBS))

    job_ids = set(ended)
    _until(
        lambda: not _live(JobMaster, job_ids),
        timeout=60,
        what="the JobMasters of the ended jobs released",
    )
    assert _live(CheckpointDriver, job_ids) == []
    assert threading.active_count() <= threads_before + SLACK, [t.name for t in threading.enumerate()]
    assert _open_loops() <= loops_before + SLACK
    d, rm = s.dispatcher, s.master.rm

    async def known_to_the_resource_manager() -> list[str]:  # requirements, heartbeats
        return [j for j in job_ids if j in rm.slot_manager.jobs or j in rm.jm_heartbeats]

    _until(
        lambda: not rm.call(known_to_the_resource_manager), timeout=60, what="the ResourceManager forgot the ended jobs"
    )

    async def with_live_metrics() -> list[str]:
        return [j for j in job_ids if d.metric_store.job_tasks(j)]

    assert s.on_dispatcher(with_live_metrics) == []
    for job_id, trigger_id in ended.items():  # the savepoints' results: read from the archives
        result = s.on_dispatcher(lambda: d.savepoint_status(job_id, trigger_id))  # noqa: B023
        assert result is not None and result["status"]["id"] == "COMPLETED", (job_id, result)
        assert result["operation"]["location"].startswith(f"file://{tmp_path}/savepoint-")
    if s.ha is not None:  # the ended jobs' HA data is gone, their JobMasters no longer published
        assert s.ha.job_graph_store().get_job_ids() == []
        assert all(s.ha.published(job_master_component(job_id)) is None for job_id in job_ids)
