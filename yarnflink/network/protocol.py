"""Wire protocol of remote channels: frame codec and Arrow batch encoding.

Every frame is an 8-byte header ``!BBHI`` (type, flags, reserved=0, payload length) followed by
the payload. A consumer opens one TCP connection per input channel and sends one REQUEST; the
server answers with a sequence of DATA / EVENT frames ended by END (or ERROR):

* REQUEST  ``b"YFN1" + u32 subpartition + utf-8 partition id``
* DATA     Arrow IPC stream messages for one batch. The sender keeps one IPC stream writer per
           connection while the schema stays the same, so the schema (and unchanged dictionaries)
           travel once; a frame with ``FLAG_NEW_STREAM`` starts a new IPC stream (first batch or
           schema change) and begins with the schema message. Body buffers are sent straight
           from the batch's memory with ``sendmsg`` and decoded zero-copy from the received,
           64-byte aligned buffer.
* EVENT    a pickled object
* END      empty: end of the subpartition
* ERROR    utf-8 message; the consumer raises it as PartitionException

Everything read from the network is validated (type, flags, reserved bits, per-type length
limits *before* allocating, exact consumption of IPC payloads); violations raise ProtocolError.
Events are unpickled, so peers must be trusted (TLS will authenticate them later).
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Sequence
from enum import IntEnum
from typing import Any, Union

import pyarrow as pa

from yarnflink.network.errors import ProtocolError

HEADER = struct.Struct("!BBHI")
REQUEST_MAGIC = b"YFN1"
_REQUEST_FIXED = struct.Struct("!4sI")
FLAG_NEW_STREAM = 0x1

MAX_REQUEST_BYTES = 4096
MAX_ERROR_BYTES = 64 * 1024
#: Default upper bound of a DATA/EVENT payload (one batch); the u32 length allows < 4 GiB.
DEFAULT_MAX_FRAME_BYTES = (1 << 31) - 1
_IOV_MAX = 512


class FrameType(IntEnum):
    REQUEST = 1
    DATA = 2
    EVENT = 3
    END = 4
    ERROR = 5


_ALLOWED_FLAGS = {FrameType.DATA: FLAG_NEW_STREAM}

BufferLike = Union[bytes, bytearray, memoryview, pa.Buffer]


# -- requests ----------------------------------------------------------------------------------
def encode_request(partition_id: str, subpartition: int) -> bytes:
    pid = partition_id.encode("utf-8")
    if not pid or len(pid) + _REQUEST_FIXED.size > MAX_REQUEST_BYTES:
        raise ValueError(f"invalid partition id {partition_id!r}")
    return _REQUEST_FIXED.pack(REQUEST_MAGIC, subpartition) + pid


def decode_request(payload: BufferLike) -> tuple[str, int]:
    data = bytes(payload)
    if len(data) <= _REQUEST_FIXED.size:
        raise ProtocolError("request too short")
    magic, subpartition = _REQUEST_FIXED.unpack_from(data)
    if magic != REQUEST_MAGIC:
        raise ProtocolError(f"bad request magic {magic!r}")
    try:
        partition_id = data[_REQUEST_FIXED.size :].decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProtocolError("partition id is not valid utf-8") from e
    if not partition_id.isprintable():
        raise ProtocolError("partition id contains non-printable characters")
    return partition_id, subpartition


# -- socket I/O --------------------------------------------------------------------------------
def _plain(sock: socket.socket) -> bool:
    """sendmsg and recv flags are unavailable on TLS sockets."""
    return not isinstance(sock, ssl.SSLSocket)


def send_buffers(sock: socket.socket, buffers: Sequence[BufferLike]) -> None:
    """Send all buffers in order, gathering them into as few syscalls as possible."""
    views = [memoryview(b).cast("B") for b in buffers]
    views = [v for v in views if v.nbytes]
    if not _plain(sock):
        for v in views:
            sock.sendall(v)
        return
    start = 0
    while start < len(views):
        sent = sock.sendmsg(views[start : start + _IOV_MAX])
        while sent:
            v = views[start]
            if sent >= v.nbytes:
                sent -= v.nbytes
                start += 1
            else:
                views[start] = v[sent:]
                sent = 0


def send_frame(
    sock: socket.socket,
    ftype: FrameType,
    pieces: Sequence[BufferLike] = (),
    flags: int = 0,
    length: int | None = None,
) -> None:
    if length is None:
        length = sum(memoryview(p).nbytes for p in pieces)
    send_buffers(sock, [HEADER.pack(ftype, flags, 0, length), *pieces])


def send_error(sock: socket.socket, message: str) -> None:
    data = message.encode("utf-8", "replace")[:MAX_ERROR_BYTES]
    send_frame(sock, FrameType.ERROR, [data])


def recv_exact_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` completely; ConnectionError on EOF (the peer died or closed mid-stream)."""
    total = view.nbytes
    got = 0
    flags = socket.MSG_WAITALL if _plain(sock) else 0
    while got < total:
        n = sock.recv_into(view[got:], total - got, flags)
        if n == 0:
            raise ConnectionError("connection closed by peer" + (" in the middle of a frame" if got else ""))
        got += n


def _max_payload(ftype: FrameType, max_frame_bytes: int) -> int:
    if ftype == FrameType.END:
        return 0
    if ftype == FrameType.ERROR:
        return MAX_ERROR_BYTES
    if ftype == FrameType.REQUEST:
        return MAX_REQUEST_BYTES
    return max_frame_bytes


def recv_frame(
    sock: socket.socket,
    allowed: frozenset[FrameType],
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
) -> tuple[FrameType, int, pa.Buffer | bytes]:
    """Read one frame of a type in ``allowed``. DATA payloads come back as an aligned
    ``pa.Buffer`` (decoded zero-copy), others as bytes."""
    header = bytearray(HEADER.size)
    recv_exact_into(sock, memoryview(header))
    raw_type, flags, reserved, length = HEADER.unpack(header)
    try:
        ftype = FrameType(raw_type)
    except ValueError:
        raise ProtocolError(f"unknown frame type {raw_type}") from None
    if ftype not in allowed:
        raise ProtocolError(f"unexpected {ftype.name} frame")
    if reserved != 0 or flags & ~_ALLOWED_FLAGS.get(ftype, 0):
        raise ProtocolError(f"bad header bits in {ftype.name} frame")
    limit = min(_max_payload(ftype, max_frame_bytes), max_frame_bytes)
    if length > limit:
        raise ProtocolError(f"{ftype.name} frame of {length} bytes exceeds limit {limit}")
    if ftype == FrameType.DATA:
        payload: pa.Buffer | bytes = pa.allocate_buffer(length)
        recv_exact_into(sock, memoryview(payload).cast("B"))
    else:
        buf = bytearray(length)
        if length:
            recv_exact_into(sock, memoryview(buf))
        payload = bytes(buf)
    return ftype, flags, payload


# -- Arrow batches -----------------------------------------------------------------------------
class _PieceSink:
    """File-like sink for the IPC writer that keeps the written pieces instead of copying them:
    body buffers arrive as ``pa.Buffer`` slices of the batch's own memory."""

    closed = False

    def __init__(self) -> None:
        self.pieces: list[Any] = []

    def write(self, data: Any) -> int:
        self.pieces.append(data)
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class BatchEncoder:
    """Turns batches of one connection into DATA frame payloads (see module doc)."""

    def __init__(self) -> None:
        self._schema: pa.Schema | None = None
        self._sink = _PieceSink()
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None

    def encode(self, batch: pa.RecordBatch) -> tuple[int, list[Any], int]:
        """Returns (flags, pieces, total length) of the DATA frame for ``batch``."""
        flags = 0
        if self._writer is None or not batch.schema.equals(self._schema, check_metadata=True):
            self._sink = _PieceSink()
            self._writer = pa.ipc.new_stream(self._sink, batch.schema)
            self._schema = batch.schema
            flags = FLAG_NEW_STREAM
        self._writer.write_batch(batch)
        pieces, self._sink.pieces = self._sink.pieces, []
        return flags, pieces, sum(len(p) for p in pieces)


class _FrameSource:
    """File-like source for the IPC reader that serves exactly one DATA payload at a time, so a
    reader can never consume bytes beyond the frame it was given."""

    closed = False

    def __init__(self) -> None:
        self.buf: pa.Buffer | None = None
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def read(self, nbytes: int = -1) -> pa.Buffer:
        assert self.buf is not None
        remaining = self.buf.size - self.pos
        if nbytes is None or nbytes < 0:
            nbytes = remaining
        if nbytes > remaining:
            raise ProtocolError("Arrow IPC message extends beyond its DATA frame")
        out = self.buf.slice(self.pos, nbytes)
        self.pos += nbytes
        return out

    def close(self) -> None:
        pass


class BatchDecoder:
    """Inverse of BatchEncoder for one connection."""

    def __init__(self) -> None:
        self._source = _FrameSource()
        self._reader: pa.ipc.RecordBatchStreamReader | None = None

    def decode(self, flags: int, payload: pa.Buffer) -> pa.RecordBatch:
        src = self._source
        src.buf, src.pos = payload, 0
        try:
            if flags & FLAG_NEW_STREAM:
                self._reader = pa.ipc.open_stream(src)
            elif self._reader is None:
                raise ProtocolError("DATA frame without a preceding schema")
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                raise ProtocolError("DATA frame holds no record batch") from None
        except ProtocolError:
            raise
        except (pa.ArrowException, OSError, ValueError, TypeError) as e:  # Arrow maps to these
            raise ProtocolError(f"invalid Arrow IPC data: {type(e).__name__}: {e}") from e
        finally:
            src.buf = None
        if src.pos != payload.size:
            raise ProtocolError("trailing bytes after record batch in DATA frame")
        return batch
