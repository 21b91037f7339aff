"""Sends the calls a deposed leader would send, with its old leader session id, and prints the
gRPC status codes as JSON (drill (b) of integration/test_ha_drills.py). Runs as its own process:
it installs the cluster's mutual-TLS material, which is process-wide.

    python integration/forge_rpc.py CONFIG_JSON OLD_SESSION_ID RM_ADDRESS TE_ADDRESS...
"""

from __future__ import annotations

import asyncio
import json
import sys

import grpc

from yarnflink.common.config import Configuration
from yarnflink.rpc.gateways import GatewayPool
from yarnflink.rpc.pb import resourcemanager_pb2, taskexecutor_pb2
from yarnflink.security import prepare_taskexecutor


async def forge(token: str, rm: str, tes: list[str]) -> dict[str, str]:
    pool = GatewayPool()
    calls = [
        (
            f"RM {rm} NotifySlotAvailable",
            pool.resource_manager(rm).NotifySlotAvailable,
            resourcemanager_pb2.NotifySlotAvailableRequest(
                fencing_token=token, resource_id="forged", slot_index=0, allocation_id="forged"
            ),
        )
    ]
    for te in tes:
        gw = pool.task_executor(te)
        calls.append(
            (
                f"TE {te} RequestSlot",
                gw.RequestSlot,
                taskexecutor_pb2.RequestSlotRequest(
                    resource_manager_token=token,
                    slot_index=0,
                    job_id="forged",
                    allocation_id="forged",
                    jobmaster_address="127.0.0.1:1",
                    jobmaster_id="forged",
                ),
            )
        )
        calls.append(
            (
                f"TE {te} HeartbeatFromResourceManager",
                gw.HeartbeatFromResourceManager,
                taskexecutor_pb2.ResourceManagerHeartbeat(resource_manager_token=token),
            )
        )
    out = {}
    for name, method, request in calls:
        try:
            await method(request, timeout=30)  # a loaded CI machine: no DEADLINE_EXCEEDED for a refusal
            out[name] = "OK"
        except grpc.aio.AioRpcError as e:
            out[name] = e.code().name
    await pool.close()
    return out


def main() -> None:
    config = Configuration(json.loads(sys.argv[1]))
    prepare_taskexecutor(config)  # the cluster's internal TLS
    print(json.dumps(asyncio.run(forge(sys.argv[2], sys.argv[3], sys.argv[4:]))))


if __name__ == "__main__":
    main()
