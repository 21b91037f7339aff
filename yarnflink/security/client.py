"""What a REST client needs to talk to a cluster: its token and the CA that signed its HTTPS
certificate, found by the cluster's URL so that no user ever types a token.

Where they come from, first match wins: credentials given explicitly; clusters this process
started (``register``); local sessions (``yarnflink.deployment.local.cluster``); the
environment (``YARNFLINK_REST_TOKEN`` or ``YARNFLINK_REST_TOKEN_FILE``, ``YARNFLINK_REST_CA``),
for clusters started elsewhere; in a master process, its own cluster's (``set_process_default``:
e.g. an application's ``main()`` running in the master talks to its Dispatcher).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from yarnflink.common.config import Configuration
from yarnflink.security.material import read_token
from yarnflink.security.options import SecurityOptions

TOKEN_ENV, TOKEN_FILE_ENV, CA_ENV = "YARNFLINK_REST_TOKEN", "YARNFLINK_REST_TOKEN_FILE", "YARNFLINK_REST_CA"


@dataclass(frozen=True)
class RestCredentials:
    token_file: str | None = None
    ca_file: str | None = None
    token_value: str | None = None

    @property
    def token(self) -> str | None:
        if self.token_value:
            return self.token_value
        if self.token_file:
            try:
                return read_token(self.token_file)
            except (OSError, ValueError):
                return None
        return None

    @classmethod
    def from_config(cls, config: Configuration) -> RestCredentials:
        token_file = (
            config.get(SecurityOptions.REST_TOKEN_FILE)
            if config.get(SecurityOptions.REST_AUTHENTICATION) == "token"
            else None
        )
        ca = config.get(SecurityOptions.SSL_REST_CA) if config.get(SecurityOptions.SSL_REST_ENABLED) else None
        return cls(token_file or None, ca or None)


def url_key(url: str) -> str:
    """``scheme://host:port`` with ``localhost`` as 127.0.0.1 and default ports filled in."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = (parts.hostname or "").lower()
    if host == "localhost":
        host = "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{host}:{port}"


_lock = threading.Lock()
_known: dict[str, RestCredentials] = {}


def register(url: str, credentials: RestCredentials) -> None:
    """Remembers a cluster this process started (e.g. a per-job local cluster)."""
    with _lock:
        _known[url_key(url)] = credentials


def unregister(url: str) -> None:
    with _lock:
        _known.pop(url_key(url), None)


def registered(url: str) -> RestCredentials | None:
    with _lock:
        return _known.get(url_key(url))


_process_default: RestCredentials | None = None


def set_process_default(credentials: RestCredentials | None) -> None:
    global _process_default
    _process_default = credentials


def process_default() -> RestCredentials | None:
    return _process_default


def from_environment() -> RestCredentials | None:
    token, token_file, ca = os.environ.get(TOKEN_ENV), os.environ.get(TOKEN_FILE_ENV), os.environ.get(CA_ENV)
    if not (token or token_file or ca):
        return None
    return RestCredentials(token_file or None, ca or None, token or None)
