"""Sends the calls a deposed leader would send, with its old leader session id, and prints the
gRPC status codes as JSON (drill (b) of integration/test_ha_drills.py). Runs as its own process:
it installs the cluster's mutual-TLS material, which is process-wide.

    python integration/forge_rpc.py CONFIG_JSON OLD_SESSION_ID RM_ADDRESS TE_ADDRESS...
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any

from yarnflink.common.config import Configuration
from yarnflink.common.rpc_errors import RPC_TIMEOUT_S, RpcException
from yarnflink.resourcemanager.gateway import NotifySlotAvailable
from yarnflink.resourcemanager.resources import UNKNOWN
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.security import prepare_taskexecutor
from yarnflink.taskexecutor.gateway import RequestSlot

#: a loaded CI machine: no DEADLINE_EXCEEDED for a refusal
TIMEOUT_S = 3 * RPC_TIMEOUT_S


async def forge(token: str, rm: str, tes: list[str]) -> dict[str, str]:
    gateways = GrpcGatewayResolver()
    calls: list[tuple[str, Coroutine[Any, Any, object]]] = [
        (
            f"RM {rm} NotifySlotAvailable",
            gateways.resource_manager(rm).notify_slot_available(
                NotifySlotAvailable(token, "forged", 0, "forged", 0), timeout=TIMEOUT_S
            ),
        )
    ]
    for te in tes:
        gw = gateways.task_executor(te)
        forged_slot = RequestSlot(token, 0, "forged", "forged", UNKNOWN, "127.0.0.1:1", "forged")
        calls.append((f"TE {te} RequestSlot", gw.request_slot(forged_slot, timeout=TIMEOUT_S)))
        calls.append(
            (f"TE {te} HeartbeatFromResourceManager", gw.heartbeat_from_resource_manager(token, timeout=TIMEOUT_S))
        )
    out = {}
    for name, call in calls:  # one after the other, as a deposed leader would
        try:
            await call
            out[name] = "OK"
        except RpcException as e:  # e.status: "StatusCode.<NAME>"
            out[name] = e.status.rpartition(".")[2]
    await gateways.close()
    return out


def main() -> None:
    config = Configuration(json.loads(sys.argv[1]))
    prepare_taskexecutor(config)  # the cluster's internal TLS
    print(json.dumps(asyncio.run(forge(sys.argv[2], sys.argv[3], sys.argv[4:]))))


if __name__ == "__main__":
    main()
