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
    """Every client must present a certificate of the cluster's CA."""
    material = current()
    if material is None:
        return None
    return grpc.ssl_server_credentials(
        [(material.key_pem, material.cert_pem)], root_certificates=material.ca_pem, require_client_auth=True
    )


def channel_credentials() -> grpc.ChannelCredentials | None:
    """This process's certificate, and the server's verified against the cluster's CA."""
    material = current()
    if material is None:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=material.ca_pem, private_key=material.key_pem, certificate_chain=material.cert_pem
    )
