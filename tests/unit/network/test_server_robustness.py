"""Malformed input sent to the data server is rejected without harming the server."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable

import pytest

from yarnflink.network import InputChannelSpec, ShuffleEnvironment
from yarnflink.network.common import parse_address
from yarnflink.network.protocol import HEADER, REQUEST_MAGIC, FrameType, encode_request

from .netutil import make_batch, net_threads

pytestmark = pytest.mark.timeout(60)
EnvFactory = Callable[..., ShuffleEnvironment]


def raw_exchange(address: str, data: bytes, close_early: bool = False) -> bytes:
    """Send raw bytes to the server and return everything it answers until EOF."""
    sock = socket.create_connection(parse_address(address), timeout=20)
    try:
        if data:
            sock.sendall(data)
        if close_early:
            return b""
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        sock.close()


def error_text(reply: bytes) -> str:
    """The message of the single ERROR frame the server must have answered with."""
    assert len(reply) >= HEADER.size, f"no ERROR frame in reply {reply!r}"
    ftype, flags, reserved, length = HEADER.unpack_from(reply)
    assert (ftype, flags, reserved) == (FrameType.ERROR, 0, 0)
    assert len(reply) == HEADER.size + length
    return reply[HEADER.size :].decode()


def request_frame(payload: bytes) -> bytes:
    return HEADER.pack(FrameType.REQUEST, 0, 0, len(payload)) + payload


MALFORMED = [
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "unknown frame type"),
    (b"\x00" * 64, "unknown frame type"),
    (HEADER.pack(FrameType.REQUEST, 0, 0, 1 << 30), "exceeds limit"),
    (HEADER.pack(FrameType.REQUEST, 0, 1, 8) + b"x" * 8, "bad header bits"),
    (HEADER.pack(FrameType.DATA, 0, 0, 4) + b"abcd", "unexpected DATA"),
    (request_frame(b"XXXX" + struct.pack("!I", 0) + b"p"), "bad request magic"),
    (request_frame(REQUEST_MAGIC + b"\x00"), "too short"),
    (request_frame(REQUEST_MAGIC + struct.pack("!I", 0) + b"\xff\xfe"), "utf-8"),
    (request_frame(encode_request("p", 99)[:-1] + b"\x07"), "non-printable"),
    (request_frame(encode_request("p", 99)), "out of range"),
]


def test_malformed_requests_are_rejected_and_server_keeps_serving(make_env: EnvFactory) -> None:
    prod = make_env(partition_request_timeout=0.5)
    partition = prod.create_result_partition("p", 1)
    for data, expected in MALFORMED:
        assert expected in error_text(raw_exchange(prod.address, data)), data
    # truncated frames and clients that vanish get no answer and do no harm
    assert raw_exchange(prod.address, HEADER.pack(FrameType.REQUEST, 0, 0, 20) + b"YFN") == b""
    raw_exchange(prod.address, b"", close_early=True)
    raw_exchange(prod.address, b"\x01\x00", close_early=True)
    # a request for an unknown partition waits for the request timeout, then gets an error
    assert "not found" in error_text(raw_exchange(prod.address, request_frame(encode_request("zz", 0))))
    # a silent connection does not block other requests
    silent = socket.create_connection(parse_address(prod.address))
    try:
        cons = make_env()
        gate = cons.create_input_gate([InputChannelSpec("p", 0, prod.address)])
        partition.emit(0, make_batch(0))
        partition.emit_event("e")
        partition.finish()
        first = gate.next(timeout=20)
        assert first is not None and first.batch.equals(make_batch(0))
        assert gate.next(timeout=20).event == "e"
        assert gate.next(timeout=20) is None
    finally:
        silent.close()
    assert any(t.name.startswith("yf-net-accept") for t in net_threads())
