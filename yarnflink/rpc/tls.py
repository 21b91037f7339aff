"""Credentials for internal gRPC. Plaintext on loopback for now; the security issue adds mutual
TLS with a per-cluster CA here, in this one place."""

from __future__ import annotations

from typing import Optional

import grpc


def server_credentials() -> Optional[grpc.ServerCredentials]:
    return None


def channel_credentials() -> Optional[grpc.ChannelCredentials]:
    return None
