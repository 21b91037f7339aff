"""A cluster's security material and how it reaches the cluster's processes.

At cluster start the starting process generates the material (``ClusterSecrets``): a fresh CA,
a member certificate it issues, the REST bearer token and, when HTTPS is on without a given
certificate, a REST server certificate. A ``CredentialHandOver`` then puts it where only the
user's processes can read it and says, as configuration entries, where each process finds it.
The CA key never leaves the starting process: nothing else needs to issue certificates.

* Local target: ``LocalDirectoryHandOver`` writes files into a 0700 directory (``security/`` in
  the session's workdir), each file 0600; processes get the paths through ``-D`` (never the
  secrets themselves: command lines are visible to every user of the machine).
* YARN (to come): a driver implements ``CredentialHandOver`` by storing the files as private
  LocalResources of the application (or in skein's key-value store, which only the
  application's owner can read) and returning the container-local paths.
"""

from __future__ import annotations

import abc
import os
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from yarnflink.common.config import Configuration
from yarnflink.dispatcher.options import RestOptions
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.security.ca import ClusterCA
from yarnflink.security.options import SecurityOptions
from yarnflink.taskexecutor.options import TaskManagerOptions

#: File names inside the security directory of a cluster.
CA_FILE, CERT_FILE, KEY_FILE = "ca.pem", "cluster.pem", "cluster-key.pem"
REST_CERT_FILE, REST_KEY_FILE, REST_CA_FILE = "rest.pem", "rest-key.pem", "rest-ca.pem"
TOKEN_FILE = "rest-token"


def generate_token() -> str:
    """256 random bits, URL-safe (usable in headers, cookies and file names)."""
    return secrets.token_urlsafe(32)


def write_private(path: Path, data: bytes) -> None:
    """Writes ``path`` so that it is never readable by anyone but its owner, not even briefly:
    created 0600 (O_EXCL on a temporary name), then renamed into place."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)  # in case the umask or a filesystem widened it
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def private_directory(path: Path) -> Path:
    """``path`` created if needed and set to 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)
    return path


def read_token(path: str) -> str:
    token = Path(path).read_text(encoding="ascii").strip()
    if not token:
        raise ValueError(f"token file {path} is empty")
    return token


@dataclass(frozen=True)
class ClusterSecrets:
    """Secrets of one cluster, in memory, before the hand-over. ``None`` = not generated (the
    configuration already points at it, or it is switched off)."""

    ca_pem: bytes | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None
    rest_cert_pem: bytes | None = None
    rest_key_pem: bytes | None = None


class CredentialHandOver(abc.ABC):
    """Puts a cluster's secrets where exactly its processes (and the user who started it) can
    read them, and returns the configuration entries that point the processes at them."""

    @abc.abstractmethod
    def hand_over(self, secrets_: ClusterSecrets) -> dict[str, str]: ...


class LocalDirectoryHandOver(CredentialHandOver):
    """Files in a 0700 directory, each 0600 (the local target)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def hand_over(self, s: ClusterSecrets) -> dict[str, str]:
        d = private_directory(self.directory)
        out: dict[str, str] = {}

        def put(name: str, data: bytes | None, *keys: str) -> None:
            if data is not None:
                write_private(d / name, data)
                out.update({k: str(d / name) for k in keys})

        # a CA that issued no member certificate only backs the REST certificate
        ca_file = CA_FILE if s.cert_pem is not None else REST_CA_FILE
        put(ca_file, s.ca_pem, SecurityOptions.SSL_INTERNAL_CA.key)
        put(CERT_FILE, s.cert_pem, SecurityOptions.SSL_INTERNAL_CERT.key)
        put(KEY_FILE, s.key_pem, SecurityOptions.SSL_INTERNAL_KEY.key)
        put(
            TOKEN_FILE,
            None if s.token is None else (s.token + "\n").encode("ascii"),
            SecurityOptions.REST_TOKEN_FILE.key,
        )
        put(REST_CERT_FILE, s.rest_cert_pem, SecurityOptions.SSL_REST_CERT.key)
        put(REST_KEY_FILE, s.rest_key_pem, SecurityOptions.SSL_REST_KEY.key)
        if s.rest_cert_pem is not None:
            out[SecurityOptions.SSL_REST_CA.key] = str(d / ca_file)
        return out


def _cluster_hosts(config: Configuration) -> list[str]:
    """Hosts a certificate must name besides loopback: the configured addresses."""
    hosts = []
    for address in (JobManagerOptions.ADDRESS, TaskManagerOptions.HOST, RestOptions.ADDRESS, RestOptions.BIND_ADDRESS):
        value = config.get(address)
        if value:
            hosts.append(str(value))
    return hosts


def ensure_cluster_security(
    config: Configuration, directory: Path, hand_over: CredentialHandOver | None = None, extra_hosts: Iterable[str] = ()
) -> Configuration:
    """``config`` completed with the cluster's security material: whatever it already points at
    is kept; what is switched on but missing is generated and handed over (by default as private
    files in ``directory``). Returns a new Configuration."""
    config = config.copy()
    need_internal = bool(config.get(SecurityOptions.SSL_INTERNAL_ENABLED)) and not (
        config.get(SecurityOptions.SSL_INTERNAL_CA)
        and config.get(SecurityOptions.SSL_INTERNAL_CERT)
        and config.get(SecurityOptions.SSL_INTERNAL_KEY)
    )
    need_token = config.get(SecurityOptions.REST_AUTHENTICATION) == "token" and not config.get(
        SecurityOptions.REST_TOKEN_FILE
    )
    need_rest_cert = bool(config.get(SecurityOptions.SSL_REST_ENABLED)) and not config.get(
        SecurityOptions.SSL_REST_CERT
    )
    if not (need_internal or need_token or need_rest_cert):
        return config
    hosts = [*_cluster_hosts(config), *extra_hosts, socket.gethostname()]
    ca = ClusterCA.generate() if (need_internal or need_rest_cert) else None
    member = ca.issue("yarnflink cluster member", hosts) if ca and need_internal else None
    rest = ca.issue("yarnflink REST", hosts) if ca and need_rest_cert else None
    generated = ClusterSecrets(
        ca_pem=ca.cert_pem if ca else None,
        cert_pem=member.cert_pem if member else None,
        key_pem=member.key_pem if member else None,
        token=generate_token() if need_token else None,
        rest_cert_pem=rest.cert_pem if rest else None,
        rest_key_pem=rest.key_pem if rest else None,
    )
    entries = (hand_over or LocalDirectoryHandOver(directory)).hand_over(generated)
    if not need_internal:
        entries.pop(SecurityOptions.SSL_INTERNAL_CA.key, None)
    for key, value in entries.items():
        config.set(key, value)
    return config
