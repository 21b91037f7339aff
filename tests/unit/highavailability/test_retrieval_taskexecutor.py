"""The TaskExecutor follows the ResourceManager's leader through ZooKeeper (issue 6, item 2).

The decisions (``ResourceManagerLeaderTracker``) are tested as pure code; then a real
TaskExecutor, two real ResourceManagers and a real ZooKeeper: the leader node changes, the
TaskExecutor drops the old leader's slots at once, registers at the new one, and refuses the old
leader's calls (fencing)."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from yarnflink.common.config import Configuration
from yarnflink.highavailability.leaderelection import LeaderInformation
from yarnflink.taskexecutor.leadership import (
    ConnectToResourceManager,
    DisconnectResourceManager,
    ResourceManagerLeaderTracker,
)

A = LeaderInformation("session-a", "127.0.0.1:1001")
B = LeaderInformation("session-b", "127.0.0.1:1002")


def _until(cond: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


# ---------------------------------------------------------------------------- pure decisions
def test_the_first_leader_is_connected_to() -> None:
    t = ResourceManagerLeaderTracker()
    assert t.leader_changed(None) == []
    assert t.leader_changed(A) == [ConnectToResourceManager(A)]
    assert t.leader == A and t.token == ""


def test_no_leader_known_keeps_the_connection_and_the_same_leader_again_costs_nothing() -> None:
    t = ResourceManagerLeaderTracker()
    t.leader_changed(A)
    assert t.registered(A, "session-a")
    assert t.leader_changed(None) == []  # suspended ZooKeeper connection: nothing changes
    assert t.leader_changed(A) == []
    assert t.accepts("session-a")


def test_a_new_leader_disconnects_the_old_one_and_forgets_its_token() -> None:
    t = ResourceManagerLeaderTracker()
    t.leader_changed(A)
    t.registered(A, "session-a")
    actions = t.leader_changed(B)
    assert [type(a) for a in actions] == [DisconnectResourceManager, ConnectToResourceManager]
    assert actions[0].leader == A and "session-" in actions[0].cause  # type: ignore[union-attr]
    assert not t.accepts("session-a") and not t.accepts("session-b")  # stale, and not yet registered
    assert t.registered(B, "session-b") and t.accepts("session-b")


def test_a_new_session_of_the_same_address_is_a_new_leader() -> None:
    t = ResourceManagerLeaderTracker()
    t.leader_changed(A)
    again = LeaderInformation("session-c", A.address)
    assert [type(a) for a in t.leader_changed(again)] == [DisconnectResourceManager, ConnectToResourceManager]


def test_registrations_count_only_for_the_current_leader_with_its_session_id() -> None:
    t = ResourceManagerLeaderTracker()
    t.leader_changed(A)
    assert not t.registered(A, "another")  # a master that answers with another session's token
    assert not t.registered(B, "session-b")  # a registration that raced with a leader change
    assert not t.accepts("")
    t.leader_changed(LeaderInformation("", "127.0.0.1:9"))  # no HA: any token of that address
    assert t.registered(LeaderInformation("", "127.0.0.1:9"), "fixed-token")


# ---------------------------------------------------------------------------- real processes' parts
def _publish(zk_address: str, ha_config: Configuration, info: LeaderInformation) -> None:
    from kazoo.client import KazooClient

    from yarnflink.highavailability.services import RESOURCE_MANAGER
    from yarnflink.highavailability.zookeeper.client import ZooKeeperPaths

    path = ZooKeeperPaths.from_config(ha_config).connection_info(RESOURCE_MANAGER)
    client = KazooClient(hosts=zk_address, timeout=10)
    client.start(10)
    try:
        client.ensure_path(path)
        client.set(path, info.to_bytes())
    finally:
        client.stop()
        client.close()


def _stale_calls(te_address: str, token: str) -> list[grpc.StatusCode]:
    from yarnflink.common.rpc_errors import RpcException
    from yarnflink.resourcemanager.resources import UNKNOWN
    from yarnflink.rpc.clients import GrpcGatewayResolver
    from yarnflink.taskexecutor.gateway import RequestSlot

    async def calls() -> list[grpc.StatusCode]:
        gateways = GrpcGatewayResolver()
        gw = gateways.task_executor(te_address)
        codes = []
        for call in (
            lambda: gw.request_slot(
                RequestSlot(token, 0, "j", "stale-alloc", UNKNOWN, "127.0.0.1:1", "jm"), timeout=10
            ),
            lambda: gw.heartbeat_from_resource_manager(token, timeout=10),
        ):
            try:
                await call()
                codes.append(grpc.StatusCode.OK)
            except RpcException as e:  # e.status: "StatusCode.<NAME>"
                codes.append(grpc.StatusCode[e.status.rpartition(".")[2]])
        await gateways.close()
        return codes

    return asyncio.run(calls())


def test_taskexecutor_follows_the_resource_manager_leader_and_fences_the_old_one(
    zookeeper: Any, ha_config: Configuration, make_ha: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    from yarnflink.resourcemanager.resourcemanager import ResourceManager
    from yarnflink.taskexecutor.taskexecutor import TaskExecutor

    config = Configuration({"heartbeat.interval": "200 ms", "heartbeat.timeout": "30 s"})
    rm1 = ResourceManager("127.0.0.1", 0, config=config, high_availability=True)
    rm2 = ResourceManager("127.0.0.1", 0, config=config, high_availability=True)
    rm1.start()
    rm2.start()
    te = TaskExecutor(
        None,
        num_slots=2,
        rm_leader_retriever=make_ha().resource_manager_leader_retriever(),
        heartbeat_interval_s=0.2,
        heartbeat_timeout_s=30,
    )
    te.start()
    try:
        rm1.grant_leadership("session-one")
        _publish(zookeeper.address, ha_config, LeaderInformation("session-one", rm1.address))
        _until(lambda: te.rm_token == "session-one", what="registration at the first leader")
        _until(lambda: te.resource_id in rm1.slot_manager.task_executors, what="rm1 knows the TaskExecutor")

        async def allocate() -> None:  # a slot of a job of the first leader's JobMaster
            te.slot_table.allocate(0, "job-1", "alloc-1")

        te.call(allocate)
        assert te.slot_table.slots_of_job("job-1")

        rm1.revoke_leadership()
        rm2.grant_leadership("session-two")
        with caplog.at_level(logging.WARNING, logger="yarnflink.taskexecutor.taskexecutor"):
            _publish(zookeeper.address, ha_config, LeaderInformation("session-two", rm2.address))
            _until(lambda: te.rm_token == "session-two", what="registration at the new leader")
            assert te.rm_address == rm2.address
            assert not te.slot_table.slots_of_job("job-1")  # freed at once, no heartbeat timeout
            _until(lambda: te.resource_id in rm2.slot_manager.task_executors, what="rm2 knows the TaskExecutor")
            rm2_slots = rm2.slot_manager.task_executors[te.resource_id]
            assert rm2_slots is not None

            # the old leader's calls, as it would send them after waking up: refused
            codes = _stale_calls(te.address, "session-one")
        assert codes == [grpc.StatusCode.FAILED_PRECONDITION] * 2
        assert te.stale_rpcs_rejected == 2
        messages = [r.getMessage() for r in caplog.records]
        assert any(m.startswith("rejected RequestSlot from stale ResourceManager") for m in messages)
        assert any(m.startswith("rejected HeartbeatFromResourceManager from stale ResourceManager") for m in messages)
        assert te.slot_table.by_allocation("stale-alloc") is None
    finally:
        te.stop()
        rm1.stop()
        rm2.stop()


def test_taskexecutor_without_ha_registers_at_its_fixed_address() -> None:
    from yarnflink.resourcemanager.resourcemanager import ResourceManager
    from yarnflink.taskexecutor.taskexecutor import TaskExecutor

    with pytest.raises(ValueError, match="either the ResourceManager's address or its leader retriever"):
        TaskExecutor(None)
    rm = ResourceManager("127.0.0.1", 0)
    rm.start()
    te = TaskExecutor(rm.address, heartbeat_interval_s=0.2)
    te.start()
    try:
        _until(lambda: te.rm_token == rm.fencing_token, what="registration")
        assert te.rm_address == rm.address
    finally:
        te.stop()
        rm.stop()
