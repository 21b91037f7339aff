"""Sends the calls a deposed JobMaster would send to TaskExecutors, with its old JobMaster id (the
old leader session id), and prints the gRPC status codes as JSON (the SIGSTOP drill of
integration/test_master_failover.py). Runs as its own process: it installs the cluster's
mutual-TLS material, which is process-wide.

    python integration/forge_jobmaster_rpc.py CONFIG_JSON OLD_JOBMASTER_ID TE_ADDRESS=EXECUTION_ID...

For every task: ``CancelTask``, ``TriggerCheckpoint`` and ``NotifyCheckpointComplete``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Coroutine
from typing import Any

from yarnflink.common.config import Configuration
from yarnflink.common.rpc_errors import RPC_TIMEOUT_S, RpcException
from yarnflink.rpc.clients import GrpcGatewayResolver
from yarnflink.security import prepare_taskexecutor
from yarnflink.taskexecutor.gateway import CancelTask, NotifyCheckpoint, TriggerCheckpoint

TIMEOUT_S = 3 * RPC_TIMEOUT_S  # a loaded CI machine: no DEADLINE_EXCEEDED for a refusal
FORGED_CHECKPOINT = 999_999


async def forge(token: str, tasks: list[tuple[str, str]]) -> dict[str, str]:
    gateways = GrpcGatewayResolver()
    calls: list[tuple[str, Coroutine[Any, Any, object]]] = []
    for te, execution_id in tasks:
        gw = gateways.task_executor(te)
        calls += [
            (f"TE {te} {execution_id} CancelTask", gw.cancel_task(CancelTask(token, execution_id), timeout=TIMEOUT_S)),
            (
                f"TE {te} {execution_id} TriggerCheckpoint",
                gw.trigger_checkpoint(TriggerCheckpoint(token, execution_id, FORGED_CHECKPOINT, 0), timeout=TIMEOUT_S),
            ),
            (
                f"TE {te} {execution_id} NotifyCheckpointComplete",
                gw.notify_checkpoint_complete(
                    NotifyCheckpoint(token, execution_id, FORGED_CHECKPOINT), timeout=TIMEOUT_S
                ),
            ),
        ]
    out = {}
    for name, call in calls:  # one after the other, as a deposed JobMaster would
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
    tasks = [tuple(arg.split("=", 1)) for arg in sys.argv[3:]]
    print(json.dumps(asyncio.run(forge(sys.argv[2], [(te, ex) for te, ex in tasks]))))


if __name__ == "__main__":
    main()
