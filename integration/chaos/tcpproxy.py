"""A TCP forwarder on a fixed loopback port that can be stopped (connections reset, new ones
refused) and started again on the same port: the S3 endpoint going away and coming back as the
cluster sees it. moto's server keeps its buckets in memory, so stopping moto itself would also
lose every object, which no real S3 outage does; the proxy stops the endpoint, not the data."""

from __future__ import annotations

import socket
import threading

__all__ = ["TcpProxy"]


class TcpProxy:
    def __init__(self, target_port: int, port: int = 0) -> None:
        self.target_port = target_port
        self.port = port
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._listener is not None

    def start(self) -> None:
        if self._listener is not None:
            return
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(64)
        self.port = s.getsockname()[1]
        self._listener = s
        threading.Thread(target=self._accept, args=(s,), name=f"TcpProxy-{self.port}", daemon=True).start()

    def stop(self) -> None:
        """Closes the listener (new connections are refused) and resets every open connection."""
        with self._lock:
            listener, self._listener = self._listener, None
            conns, self._conns = self._conns, set()
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        for c in conns:
            _close(c)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # stopped
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    upstream.close()
                    return
                self._conns |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with self._lock:
                    self._conns.discard(s)
                _close(s)


def _close(s: socket.socket) -> None:
    """shutdown wakes the other pump thread blocked in recv on ``s`` (close alone does not)."""
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
