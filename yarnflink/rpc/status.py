"""gRPC status codes and the gateways' exceptions (``yarnflink.common.rpc_errors``), both ways, in
one place: a servicer aborts with the code of what its endpoint raised, a client raises what the
code of a failed call means.

A refusal that is neither a fencing, an argument nor a lookup problem travels as
FAILED_PRECONDITION like a fencing mismatch (what callers outside yarnflink see), with trailing
metadata that lets our clients tell the two apart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import grpc

from yarnflink.common.rpc_errors import (
    FencingTokenMismatch,
    InvalidRequest,
    RpcException,
    RpcRejected,
    RpcTimeout,
    RpcUnreachable,
    UnknownTarget,
)

T = TypeVar("T")

#: trailing metadata key naming the exception a servicer raised
ERROR_KEY = "yarnflink-error"


def status_of(e: RpcRejected) -> grpc.StatusCode:
    if isinstance(e, InvalidRequest):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(e, UnknownTarget):
        return grpc.StatusCode.NOT_FOUND
    return grpc.StatusCode.FAILED_PRECONDITION


async def abort(context: grpc.aio.ServicerContext[object, object], e: RpcRejected) -> NoReturn:
    """Ends the call with the status of ``e`` (raises inside the servicer)."""
    kind = "rejected" if type(e) is RpcRejected else type(e).__name__
    await context.abort(status_of(e), str(e), trailing_metadata=((ERROR_KEY, kind),))
    raise AssertionError("unreachable: abort raises")  # pragma: no cover


def _kind(e: grpc.aio.AioRpcError) -> str:
    for key, value in e.trailing_metadata() or ():
        if key == ERROR_KEY:
            return str(value)
    return ""


def exception_of(e: grpc.aio.AioRpcError) -> RpcException:
    """What a failed call means to the caller."""
    code = e.code()
    details = e.details() or str(code)
    status = str(code)
    if code == grpc.StatusCode.UNAVAILABLE:
        return RpcUnreachable(details, status)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return RpcTimeout(details, status)
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return InvalidRequest(details, status)
    if code == grpc.StatusCode.NOT_FOUND:
        return UnknownTarget(details, status)
    if code == grpc.StatusCode.FAILED_PRECONDITION:
        if _kind(e) == "rejected":
            return RpcRejected(details, status)
        return FencingTokenMismatch(details, status)
    return RpcRejected(details, status)


async def call(rpc: Callable[[], Awaitable[T]]) -> T:
    """Runs one client call; a gRPC failure leaves it as the matching RpcException."""
    try:
        return await rpc()
    except grpc.aio.AioRpcError as e:
        raise exception_of(e) from None
