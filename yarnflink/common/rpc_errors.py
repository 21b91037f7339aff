"""What a call to another component's gateway can fail with, importable without grpc.

The gRPC adapter (``yarnflink.rpc``) maps status codes to these in one place, both ways: an
endpoint raises them to refuse a call, and a caller catches them::

    RpcException                        the call did not succeed
    ├── RpcUnreachable (ConnectionError)   the peer's process is not there (UNAVAILABLE)
    ├── RpcTimeout (TimeoutError)          no answer within the deadline (DEADLINE_EXCEEDED)
    └── RpcRejected                        the peer answered with a refusal
        ├── FencingTokenMismatch           stale or unknown fencing token, or not the leader
        │                                  (FAILED_PRECONDITION)
        ├── InvalidRequest (ValueError)    a malformed request (INVALID_ARGUMENT)
        └── UnknownTarget (LookupError)    what the call names is not there (NOT_FOUND)

A plain ``RpcRejected`` is any other refusal (a slot that cannot be allocated, a failure inside
the peer).
"""

from __future__ import annotations

__all__ = [
    "RPC_TIMEOUT_S",
    "FencingTokenMismatch",
    "InvalidRequest",
    "RpcException",
    "RpcRejected",
    "RpcTimeout",
    "RpcUnreachable",
    "UnknownTarget",
    "check_fencing",
]

#: Deadline for a single RPC between components (a call raises RpcTimeout after it).
RPC_TIMEOUT_S = 10.0


class RpcException(Exception):
    """A call to a gateway did not succeed; ``str(e)`` says why (the peer's words if it answered),
    ``status`` names the transport's status (e.g. ``StatusCode.UNAVAILABLE``; empty if none)."""

    def __init__(self, message: str = "", status: str = "") -> None:
        super().__init__(message)
        self.status = status


class RpcUnreachable(RpcException, ConnectionError):
    """The peer's process is not there (connection refused, or it went away): not a slow peer."""


class RpcTimeout(RpcException, TimeoutError):
    """The peer did not answer within the call's deadline (it may be slow, busy or gone)."""


class RpcRejected(RpcException):
    """The peer answered and refused the call."""


class FencingTokenMismatch(RpcRejected):
    """The call's fencing token is not the callee's current one (Flink's FencingTokenException):
    the caller talks to a former leader, or the callee no longer leads."""


class InvalidRequest(RpcRejected, ValueError):
    """The request is malformed (a field out of range, a required field missing)."""


class UnknownTarget(RpcRejected, LookupError):
    """What the call names (a task, a slot) is not at the callee."""


def check_fencing(expected: str, got: str, who: str) -> None:
    """Refuses a call whose fencing token is not the endpoint's current one (Flink's
    FencedRpcEndpoint). An empty ``expected`` (not leading) refuses everything."""
    if not got or got != expected:
        raise FencingTokenMismatch(
            f"fencing token mismatch for {who}: expected {expected or '<none>'}, got {got or '<none>'}"
        )
