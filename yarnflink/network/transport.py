"""TCP transport of remote channels: socket creation, the partition server, the reader client.

Threading model (blocking sockets; the GIL is released during socket I/O):

* server: one accept thread, plus one thread per incoming connection that waits for the
  requested partition, then moves items from the subpartition to the socket. ``sendall`` blocking
  on a full TCP window leaves the subpartition queue full, which blocks the producer's ``emit()``.
* client: one thread per remote input channel that reads frames and puts decoded items into the
  channel's bounded queue. When that queue is full the thread stops reading, so the TCP window
  closes and the backpressure reaches the producer.

All sockets are created by ``create_server_socket``/``connect_to`` so that TLS can be added in one
place later. No lock is held while doing socket I/O.
"""

from __future__ import annotations

import logging
import pickle
import socket
import struct
import threading
import time

from yarnflink.network.common import KIND_DATA, KIND_END, KIND_EVENT, InputChannelSpec, parse_address
from yarnflink.network.errors import (
    CancelledTransfer,
    PartitionException,
    ProducerFailed,
    ProtocolError,
)
from yarnflink.network.partition import PartitionRegistry, SubpartitionView
from yarnflink.network.protocol import (
    DEFAULT_MAX_FRAME_BYTES,
    BatchDecoder,
    BatchEncoder,
    FrameType,
    decode_request,
    encode_request,
    recv_frame,
    send_error,
    send_frame,
)
from yarnflink.network.queues import BoundedQueue
from yarnflink.security.internal import wrap_data_client_socket, wrap_data_server_socket

log = logging.getLogger(__name__)

_SERVER_FRAMES = frozenset({FrameType.REQUEST})
_CLIENT_FRAMES = frozenset({FrameType.DATA, FrameType.EVENT, FrameType.END, FrameType.ERROR})


# -- socket creation (the one place to add TLS) ------------------------------------------------
def _configure(sock: socket.socket) -> None:
    """Small frames (END, events, barriers) must not wait for Nagle; keepalive detects dead
    peers that vanish without a FIN/RST."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)


def create_server_socket(host: str, port: int, backlog: int = 128) -> socket.socket:
    # mutual TLS with the cluster's CA when installed (handshake on each connection's first read)
    return wrap_data_server_socket(socket.create_server((host, port), backlog=backlog))


def connect_to(address: str, timeout: float) -> socket.socket:
    """Connect to a producer's data server (only ever to an address a spec names)."""
    host, port = parse_address(address)
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        _configure(sock)
        sock = wrap_data_client_socket(sock, host)  # TLS handshake within `timeout`, if installed
        sock.settimeout(None)
    except OSError:
        sock.close()
        raise
    return sock


def _shutdown(sock: socket.socket) -> None:
    """Unblock any thread in recv/send/accept on ``sock``."""
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _reject(conn: socket.socket, message: str) -> None:
    """Send ERROR, then half-close and drain briefly: closing a socket with unread input sends a
    RST that could destroy the ERROR frame before the peer reads it."""
    send_error(conn, message)
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(1.0)
        drained = 0
        while drained < 1 << 16:
            chunk = conn.recv(4096)
            if not chunk:
                break
            drained += len(chunk)
    except OSError:
        pass


# -- server ------------------------------------------------------------------------------------
class PartitionServer:
    """Serves subpartitions of the partitions in ``registry`` to remote input channels."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: PartitionRegistry,
        *,
        partition_request_timeout: float,
        handshake_timeout: float = 10.0,
    ) -> None:
        self._host = host
        self._port = port
        self._registry = registry
        self._request_timeout = partition_request_timeout
        self._handshake_timeout = handshake_timeout
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, threading.Thread] = {}
        self._closed = False
        self._listen: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self.address = ""

    def start(self) -> None:
        self._listen = create_server_socket(self._host, self._port)
        port = self._listen.getsockname()[1]
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.address = f"{host}:{port}"
        self._accept_thread = threading.Thread(target=self._accept_loop, name=f"yf-net-accept-{port}", daemon=True)
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        assert self._listen is not None
        while not self._closed:
            try:
                conn, _ = self._listen.accept()
            except OSError as e:
                if self._closed:
                    return
                log.warning("accept failed on %s: %s", self.address, e)
                time.sleep(0.05)  # e.g. EMFILE: do not spin
                continue
            try:
                _configure(conn)
            except OSError:
                conn.close()
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), name=f"yf-net-send-{self.address}", daemon=True)
            with self._lock:  # start under the lock so close() never sees an unstarted thread
                if self._closed:
                    conn.close()
                    return
                self._conns[conn] = thread
                thread.start()

    def _serve(self, conn: socket.socket) -> None:
        view: SubpartitionView | None = None
        try:
            conn.settimeout(self._handshake_timeout)
            try:
                _, _, payload = recv_frame(conn, _SERVER_FRAMES)
                partition_id, subpartition = decode_request(payload)
            except ProtocolError as e:
                log.warning("rejecting connection to %s: %s", self.address, e)
                _reject(conn, f"protocol error: {e}")
                return
            conn.settimeout(None)
            partition = self._registry.wait_for(partition_id, self._request_timeout)
            if partition is None:
                reason = "server is shutting down" if self._closed else f"not found within {self._request_timeout:g}s"
                _reject(conn, f"partition {partition_id} at {self.address}: {reason}")
                return
            try:
                view = partition.create_view(subpartition)
            except (ValueError, CancelledTransfer) as e:
                _reject(conn, str(e))
                return
            self._stream(conn, view)
        except OSError:
            pass  # the consumer went away; releasing the view below tells the producer
        except Exception:
            log.exception("unexpected error serving a partition request on %s", self.address)
        finally:
            if view is not None:
                view.release()
            with self._lock:
                self._conns.pop(conn, None)
            conn.close()

    @staticmethod
    def _stream(conn: socket.socket, view: SubpartitionView) -> None:
        encoder = BatchEncoder()
        while True:
            try:
                kind, payload = view.get()
            except (ProducerFailed, CancelledTransfer) as e:
                send_error(conn, str(e))
                return
            if kind == KIND_DATA:
                flags, pieces, length = encoder.encode(payload)
                send_frame(conn, FrameType.DATA, pieces, flags, length)
            elif kind == KIND_EVENT:
                try:
                    data = pickle.dumps(payload, protocol=5)
                except Exception as e:
                    send_error(conn, f"cannot serialize event {type(payload).__name__}: {e}")
                    return
                send_frame(conn, FrameType.EVENT, [data])
            else:
                send_frame(conn, FrameType.END)
                return

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, cut all connections, join threads (at most ``timeout`` seconds)."""
        with self._lock:
            self._closed = True
            conns = dict(self._conns)
        if self._listen is not None:
            _shutdown(self._listen)
            self._listen.close()
        for conn in conns:
            _shutdown(conn)
        deadline = time.monotonic() + timeout
        threads = list(conns.values())
        if self._accept_thread is not None:
            threads.append(self._accept_thread)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))


# -- client ------------------------------------------------------------------------------------
class PartitionReader:
    """Consumer side of one remote input channel: requests the subpartition and fills ``queue``
    with ``(kind, payload)`` items. Any failure aborts the queue with a PartitionException, so the
    gate sees it on its next poll of this channel."""

    def __init__(
        self,
        spec: InputChannelSpec,
        queue: BoundedQueue,
        *,
        connect_timeout: float,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    ) -> None:
        self._spec = spec
        self._queue = queue
        self._connect_timeout = connect_timeout
        self._max_frame_bytes = max_frame_bytes
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._closed = False
        self._thread = threading.Thread(
            target=self._run,
            name=f"yf-net-recv-{spec.partition_id[:12]}-{spec.subpartition}",
            daemon=True,
        )

    def start(self) -> None:
        self._thread.start()

    def _fail(self, message: str) -> None:
        spec = self._spec
        self._queue.abort(PartitionException(message, spec.partition_id, spec.address))

    def _run(self) -> None:
        spec = self._spec
        sock: socket.socket | None = None
        try:
            sock = connect_to(spec.address, self._connect_timeout)
            with self._lock:
                if self._closed:
                    return
                self._sock = sock
            send_frame(sock, FrameType.REQUEST, [encode_request(spec.partition_id, spec.subpartition)])
            self._receive(sock)
        except CancelledTransfer:
            pass  # our gate closed the channel
        except ProtocolError as e:
            self._fail(f"protocol error reading subpartition {spec.subpartition}: {e}")
        except (OSError, ValueError) as e:
            if not self._closed:
                self._fail(f"connection for subpartition {spec.subpartition} lost: {type(e).__name__}: {e}")
        except PartitionException as e:
            self._queue.abort(e)
        except Exception as e:  # never let a bad peer kill the thread silently
            log.exception("unexpected error reading %s", spec)
            self._fail(f"error reading subpartition {spec.subpartition}: {type(e).__name__}: {e}")
        finally:
            if sock is not None:
                sock.close()

    def _receive(self, sock: socket.socket) -> None:
        spec = self._spec
        decoder = BatchDecoder()
        put = self._queue.put
        while True:
            ftype, flags, payload = recv_frame(sock, _CLIENT_FRAMES, self._max_frame_bytes)
            if ftype == FrameType.DATA:
                batch = decoder.decode(flags, payload)  # type: ignore[arg-type]
                put((KIND_DATA, batch), payload.size)  # type: ignore[union-attr]
            elif ftype == FrameType.EVENT:
                try:
                    event = pickle.loads(payload)
                except Exception as e:
                    raise ProtocolError(f"undecodable event: {type(e).__name__}: {e}") from e
                put((KIND_EVENT, event), len(payload))
            elif ftype == FrameType.END:
                put((KIND_END, None), 0, force=True)
                return
            else:
                message = bytes(payload).decode("utf-8", "replace")
                raise PartitionException(message, spec.partition_id, spec.address)

    def close(self, timeout: float = 5.0) -> None:
        """Cut the connection and join the thread. The owner aborts the queue first, so a
        thread blocked in ``put`` wakes up too."""
        with self._lock:
            self._closed = True
            sock = self._sock
        if sock is not None:
            # abandon the stream with a RST when the socket closes: after a plain FIN (or
            # SHUT_RD, whose late data Linux still acknowledges) a producer could keep sending
            # into the void instead of learning at once that its consumer went away
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
            _shutdown(sock)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)
