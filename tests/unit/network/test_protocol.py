"""Frame codec and Arrow batch encoding of remote channels, over a socketpair."""

from __future__ import annotations

import socket

import pyarrow as pa
import pytest

from yarnflink.network.errors import ProtocolError
from yarnflink.network.protocol import (
    FLAG_NEW_STREAM,
    HEADER,
    BatchDecoder,
    BatchEncoder,
    FrameType,
    decode_request,
    encode_request,
    recv_frame,
    send_frame,
)

from .netutil import make_batch

pytestmark = pytest.mark.timeout(60)
ALL = frozenset(FrameType)


def roundtrip(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    a, b = socket.socketpair()
    enc, dec = BatchEncoder(), BatchDecoder()
    out = []
    try:
        for batch in batches:
            flags, pieces, length = enc.encode(batch)
            send_frame(a, FrameType.DATA, pieces, flags, length)
            ftype, rflags, payload = recv_frame(b, ALL)
            assert ftype == FrameType.DATA and rflags == flags
            out.append(dec.decode(rflags, payload))
    finally:
        a.close()
        b.close()
    return out


def test_schema_sent_once_per_schema() -> None:
    enc = BatchEncoder()
    flags = [enc.encode(make_batch(i * 10, 10, cols=c))[0] for i, c in enumerate([2, 2, 3, 3, 2])]
    assert flags == [FLAG_NEW_STREAM, 0, FLAG_NEW_STREAM, 0, FLAG_NEW_STREAM]


def test_roundtrip_schema_changes_slices_dictionaries_nested() -> None:
    base = make_batch(0, 1000)
    dict_a = pa.record_batch({"d": pa.array(["x", "y", None, "x"]).dictionary_encode()})
    dict_b = pa.record_batch({"d": pa.array(["p", "q", "r", "p"]).dictionary_encode()})
    nested = pa.record_batch({"l": pa.array([[1, 2], None, [3]]), "s": pa.array([{"a": 1, "b": "z"}] * 3)})
    batches = [
        base,
        base.slice(17, 100),
        make_batch(5, 0),  # empty
        dict_a,
        dict_b,  # dictionary replaced within one stream
        nested,
        pa.record_batch({"t": pa.array(["héllo", "", None])}),
        base.replace_schema_metadata({"k": "v"}),
        base,
    ]
    out = roundtrip(batches)
    for sent, got in zip(batches, out):
        assert got.schema.equals(sent.schema, check_metadata=True)
        assert got.equals(sent)


def test_decoded_buffers_are_aligned() -> None:
    (got,) = roundtrip([make_batch(0, 1000)])
    for col in got.columns:
        for buf in col.buffers():
            if buf is not None:
                assert buf.address % 8 == 0


def test_request_codec_validation() -> None:
    assert decode_request(encode_request("pid-1", 7)) == ("pid-1", 7)
    with pytest.raises(ProtocolError):
        decode_request(b"XXXX\x00\x00\x00\x01pid")
    with pytest.raises(ProtocolError):
        decode_request(b"YFN1\x00\x00")
    with pytest.raises(ProtocolError):
        decode_request(b"YFN1\x00\x00\x00\x01\xff\xfe")
    with pytest.raises(ValueError):
        encode_request("", 0)


@pytest.mark.parametrize(
    "header, match",
    [
        (HEADER.pack(99, 0, 0, 0), "unknown frame type"),
        (HEADER.pack(FrameType.END, 0, 7, 0), "bad header bits"),
        (HEADER.pack(FrameType.DATA, 0x80, 0, 0), "bad header bits"),
        (HEADER.pack(FrameType.END, 0, 0, 5), "exceeds limit"),
        (HEADER.pack(FrameType.ERROR, 0, 0, 1 << 30), "exceeds limit"),
        (HEADER.pack(FrameType.DATA, 0, 0, 1 << 20), "exceeds limit"),
    ],
)
def test_bad_headers_rejected_before_reading_payload(header: bytes, match: str) -> None:
    a, b = socket.socketpair()
    try:
        a.sendall(header)
        with pytest.raises(ProtocolError, match=match):
            recv_frame(b, ALL, max_frame_bytes=1 << 16)
    finally:
        a.close()
        b.close()


def test_unexpected_type_and_truncation() -> None:
    a, b = socket.socketpair()
    try:
        send_frame(a, FrameType.END)
        with pytest.raises(ProtocolError, match="unexpected END"):
            recv_frame(b, frozenset({FrameType.REQUEST}))
        a.sendall(HEADER.pack(FrameType.EVENT, 0, 0, 100) + b"abc")
        a.close()
        with pytest.raises(ConnectionError):
            recv_frame(b, ALL)
    finally:
        b.close()


@pytest.mark.parametrize(
    "flags, payload, match",
    [
        (0, b"\x00" * 16, "without a preceding schema"),
        (FLAG_NEW_STREAM, b"\xff" * 64, "invalid Arrow IPC"),
        (FLAG_NEW_STREAM, b"\xff\xff\xff\xff\x10\x00\x00\x00" + b"\x00" * 8, "Arrow IPC"),
        (FLAG_NEW_STREAM, b"", "Arrow IPC"),
    ],
)
def test_garbage_ipc_payload_is_protocol_error(flags: int, payload: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        BatchDecoder().decode(flags, pa.py_buffer(payload))


def test_trailing_bytes_rejected() -> None:
    enc = BatchEncoder()
    flags, pieces, _ = enc.encode(make_batch(0, 10))
    data = b"".join(bytes(p) for p in pieces) + b"\x00" * 8
    with pytest.raises(ProtocolError, match="trailing"):
        BatchDecoder().decode(flags, pa.py_buffer(data))
