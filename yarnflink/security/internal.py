"""Mutual TLS inside a cluster: gRPC between master and TaskExecutors, and the data transport
between TaskExecutors.

A process belongs to exactly one cluster, so its TLS material is process-wide: the entrypoints
call ``install(config)`` once at start, and the two places that open connections ask
``current()`` (``yarnflink.rpc.tls`` for gRPC, ``wrap_data_server_socket``/
``wrap_data_client_socket`` for the transport). Nothing installed means plaintext; that is only
the case for components built in-process by tests, never for a process started by an entrypoint
with ``security.ssl.internal.enabled: true`` (the default), which refuses to start without the
cluster's certificate.
"""

from __future__ import annotations

import os
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.security.options import SecurityOptions


class SecurityConfigError(ConfigError):
    """Security is switched on but its material is missing or unreadable; says what to set."""


def read_pem(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise SecurityConfigError(f"cannot read {key} file {path!r}: {e.strerror or e}") from None
    if b"-----BEGIN " not in data:
        raise SecurityConfigError(f"{key} file {path!r} is not PEM")
    return data


@dataclass(frozen=True)
class InternalTls:
    """The PEM material of one cluster member: the cluster's CA, this process's certificate and key."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    #: where cert and key were read from (OpenSSL's SSLContext loads keys only from files)
    cert_file: str | None = None
    key_file: str | None = None

    @classmethod
    def from_config(cls, config: Configuration) -> InternalTls | None:
        """None if ``security.ssl.internal.enabled`` is false; otherwise the material the
        configuration points at, or SecurityConfigError naming what is missing."""
        if not config.get(SecurityOptions.SSL_INTERNAL_ENABLED):
            return None
        material = (
            SecurityOptions.SSL_INTERNAL_CA,
            SecurityOptions.SSL_INTERNAL_CERT,
            SecurityOptions.SSL_INTERNAL_KEY,
        )
        missing = [o.key for o in material if not config.get(o)]
        if missing:
            raise SecurityConfigError(
                f"security.ssl.internal.enabled is true but {', '.join(missing)} "
                f"{'is' if len(missing) == 1 else 'are'} not set: a process joins a cluster only with "
                "that cluster's CA certificate and a certificate it issued (a local session keeps them "
                "in <session workdir>/security/; pass them with -D or set "
                "security.ssl.internal.enabled: false on every process of the cluster)"
            )
        ca, cert, key = (read_pem(str(config.get(o)), o.key) for o in material)
        return cls(ca, cert, key, str(config.get(material[1])), str(config.get(material[2])))

    # ------------------------------------------------------------------ data transport
    def ssl_context(self, server_side: bool) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if server_side else ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(cadata=self.ca_pem.decode("ascii"))
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        else:
            _load_cert_chain(ctx, self.cert_pem, self.key_pem)
        return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """For material that exists only in memory: a private temporary file for the duration of
    the call."""
    fd, path = tempfile.mkstemp(prefix="yarnflink-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as f:  # mkstemp creates it 0600
            f.write(key_pem + b"\n" + cert_pem)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)


# ---------------------------------------------------------------------- the process-wide state
_lock = threading.Lock()
_current: InternalTls | None = None
_contexts: dict[bool, ssl.SSLContext] = {}


def install(config: Configuration) -> InternalTls | None:
    """Loads this process's cluster material from ``config`` (see ``InternalTls.from_config``)
    and makes it the one every gRPC server/channel and data socket of this process uses."""
    material = InternalTls.from_config(config)
    try:
        set_current(material)
    except (ssl.SSLError, ValueError) as e:
        raise SecurityConfigError(f"security.ssl.internal.cert/key/ca cannot be used together: {e}") from None
    return material


def set_current(material: InternalTls | None) -> None:
    global _current
    contexts = {True: material.ssl_context(True), False: material.ssl_context(False)} if material else {}
    with _lock:
        _current = material
        _contexts.clear()
        _contexts.update(contexts)


def current() -> InternalTls | None:
    return _current


def wrap_data_server_socket(sock: socket.socket) -> socket.socket:
    """A listening data socket whose accepted connections speak TLS and require a client
    certificate of the cluster's CA. The handshake happens on the connection's first read, in
    the thread serving it (under its handshake timeout), never in the accept thread."""
    ctx = _contexts.get(True)
    if ctx is None:
        return sock
    return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)


def wrap_data_client_socket(sock: socket.socket, host: str) -> socket.socket:
    """A connected data socket, after a completed TLS handshake that verified the server's
    certificate (cluster CA and ``host``) and presented ours. Closes ``sock`` on failure."""
    ctx = _contexts.get(False)
    if ctx is None:
        return sock
    try:
        return ctx.wrap_socket(sock, server_hostname=host.strip("[]"))
    except BaseException:
        sock.close()
        raise
