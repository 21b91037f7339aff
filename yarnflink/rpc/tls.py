"""Credentials for internal gRPC: mutual TLS with the cluster's CA (``yarnflink.security.internal``).

Every gRPC server of a process requires a client certificate issued by its cluster's CA, and
every channel presents this process's certificate and verifies the server's against the same CA
(and the target's host name). ``None`` (plaintext) only when no material is installed: components
built in-process by tests, or ``security.ssl.internal.enabled: false``.
"""

from __future__ import annotations

import grpc

from yarnflink.security.internal import current


def server_credentials() -> grpc.ServerCredentials | None:
    material = current()
    return material.grpc_server_credentials() if material is not None else None


def channel_credentials() -> grpc.ChannelCredentials | None:
    material = current()
    return material.grpc_channel_credentials() if material is not None else None
