"""``Dispatcher.suspend_jobs`` (the master stepping down, HA): every JobMaster is suspended through
its gateway on the Dispatcher's loop, whatever thread asks, then stopped; from the Dispatcher's own
thread it refuses (it blocks). The JobMasters are real, their ResourceManager a testing gateway."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from tests.fakes.conditions import wait_until
from tests.fakes.gateways import TestingGatewayResolver, TestingResourceManagerGateway
from tests.unit.highavailability.helpers import graph
from yarnflink.common.config import Configuration
from yarnflink.dispatcher.dispatcher import Dispatcher
from yarnflink.jobmaster.jobmaster import JobMaster

JOB = "a" * 32


@pytest.fixture
def rm() -> TestingResourceManagerGateway:
    return TestingGatewayResolver().add_resource_manager()


@pytest.fixture
def dispatcher(rm: TestingResourceManagerGateway) -> Iterator[Dispatcher]:
    resolver = TestingGatewayResolver()
    resolver.resource_managers[rm.address] = rm  # the JobMasters' ResourceManager is the Dispatcher's
    config = Configuration({"rest.port": "0", "security.rest.authentication": "none"})
    d = Dispatcher(
        config,
        rm,
        rest_host="127.0.0.1",
        rest_port=0,
        gateways=TestingGatewayResolver(),
        job_master_gateways=lambda: resolver,
    )
    d.start()
    yield d
    d.stop()


def _running_job_master(d: Dispatcher, rm: TestingResourceManagerGateway) -> JobMaster:
    d.call(lambda: d.submit_job(graph(JOB)))
    wait_until(lambda: rm.count("declare_required_resources") >= 1, what="the JobMaster asking for slots")
    jm = d.jobs[JOB].master
    assert jm is not None and jm.jobmaster_id
    return jm


def test_suspending_from_a_thread_that_runs_a_loop_suspends_every_job_master(
    dispatcher: Dispatcher, rm: TestingResourceManagerGateway, caplog: pytest.LogCaptureFixture
) -> None:
    jm = _running_job_master(dispatcher, rm)

    async def step_down() -> None:  # a caller whose own loop runs (asyncio.run here would fail)
        dispatcher.suspend_jobs("the master lost its leadership: test", timeout=2.0)

    with caplog.at_level(logging.INFO, logger="yarnflink.jobmaster.jobmaster"):
        asyncio.run(step_down())

    assert f"job {JOB} suspended" in caplog.text
    assert jm.jobmaster_id == ""  # suspended: it refuses every RPC
    assert dispatcher.jobs[JOB].archive is None  # not a terminal state: the next leader runs the job


def test_suspending_from_the_dispatchers_own_thread_is_refused(
    dispatcher: Dispatcher, rm: TestingResourceManagerGateway
) -> None:
    jm = _running_job_master(dispatcher, rm)

    async def on_its_loop() -> None:
        dispatcher.suspend_jobs("on its own loop")

    with pytest.raises(RuntimeError, match="another thread"):
        dispatcher.call(on_its_loop)
    assert jm.jobmaster_id  # nothing happened
