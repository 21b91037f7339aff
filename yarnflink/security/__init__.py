"""Security by default.

* REST: a per-cluster bearer token (``security.rest.authentication``), optional HTTPS
  (``security.ssl.rest.*``), body limits: ``yarnflink.security.rest``.
* Inside the cluster: mutual TLS with a per-cluster CA for gRPC and the data transport
  (``security.ssl.internal.*``): ``yarnflink.security.internal`` (process-wide material),
  ``yarnflink.security.ca`` (the CA).
* Getting the material to the processes: ``yarnflink.security.material`` (generation, and the
  ``CredentialHandOver`` interface a deployment implements; files in a 0700 directory locally).
* Clients: ``yarnflink.security.client`` finds the token and CA for a REST URL.

Entrypoints call ``prepare_master`` / ``prepare_taskexecutor`` first thing.
"""

from __future__ import annotations

import logging
from pathlib import Path

from yarnflink.common.config import Configuration
from yarnflink.security.client import RestCredentials, set_process_default
from yarnflink.security.internal import SecurityConfigError, install
from yarnflink.security.material import CA_FILE, CERT_FILE, KEY_FILE, ensure_cluster_security
from yarnflink.security.options import SecurityOptions

__all__ = ["SecurityConfigError", "install_directory_material", "prepare_master", "prepare_taskexecutor"]

log = logging.getLogger(__name__)
_MATERIAL = (
    SecurityOptions.REST_TOKEN_FILE,
    SecurityOptions.SSL_INTERNAL_CA,
    SecurityOptions.SSL_INTERNAL_CERT,
    SecurityOptions.SSL_INTERNAL_KEY,
    SecurityOptions.SSL_REST_CERT,
    SecurityOptions.SSL_REST_KEY,
)


def prepare_master(config: Configuration, workdir: Path) -> Configuration:
    """The master's configuration completed with the cluster's material (generated into
    ``<workdir>/security`` if the configuration names none, e.g. a standalone ``yarnflink master
    start``), with the internal TLS material installed for this process."""
    prepared = ensure_cluster_security(config, workdir / "security")
    generated = {o.key: prepared.get(o) for o in _MATERIAL if prepared.get(o) != config.get(o)}
    if generated:
        log.info(
            "generated the cluster's security material: %s; TaskExecutors started by hand need "
            "-D security.ssl.internal.ca/cert/key with these files",
            generated,
        )
    install(prepared)

    set_process_default(RestCredentials.from_config(prepared))  # e.g. an application's main() in the master
    return prepared


def prepare_taskexecutor(config: Configuration) -> None:
    """Installs the internal TLS material the configuration names; a TaskExecutor never
    generates any (it must hold a certificate of its cluster's CA)."""
    install(config)


def install_directory_material(directory: Path) -> None:
    """Internal TLS for processes that run cluster members in-process (benchmarks, tools): the
    material in ``directory`` (generated there by the first caller) installed for this process."""
    config = Configuration({SecurityOptions.REST_AUTHENTICATION.key: "none"})
    if (directory / KEY_FILE).exists():
        config.set(SecurityOptions.SSL_INTERNAL_CA, str(directory / CA_FILE))
        config.set(SecurityOptions.SSL_INTERNAL_CERT, str(directory / CERT_FILE))
        config.set(SecurityOptions.SSL_INTERNAL_KEY, str(directory / KEY_FILE))
    install(ensure_cluster_security(config, directory))
