"""Options of security (Flink's ``SecurityOptions``: ``security.ssl.*`` keys with PEM files instead
of keystores; docs/SECURITY.md).
"""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["SecurityOptions"]


class SecurityOptions:
    """REST authentication, TLS for REST and inside the cluster, and the Kerberos login for YARN."""

    REST_AUTHENTICATION = ConfigOption(
        "security.rest.authentication",
        "enum",
        "token",
        "How REST clients authenticate: 'token' (a bearer token generated per cluster; every endpoint "
        "but /health requires it) or 'none' (whoever reaches the port may use the API).",
        choices=("token", "none"),
    )
    REST_TOKEN_FILE = ConfigOption(
        "security.rest.token-file",
        "str",
        None,
        "File holding the REST bearer token (mode 0600). A local cluster generates it in its working directory.",
    )
    SSL_REST_ENABLED = ConfigOption(
        "security.ssl.rest.enabled",
        "bool",
        False,
        "Serve the REST API over HTTPS.",
    )
    SSL_REST_CERT = ConfigOption(
        "security.ssl.rest.cert",
        "str",
        None,
        "PEM certificate (chain) of the REST server; a local cluster issues one from its CA if unset.",
    )
    SSL_REST_KEY = ConfigOption(
        "security.ssl.rest.key",
        "str",
        None,
        "PEM private key of security.ssl.rest.cert.",
    )
    SSL_REST_CA = ConfigOption(
        "security.ssl.rest.ca",
        "str",
        None,
        "PEM CA certificate(s) REST clients trust (default: the system's trust store).",
    )
    SSL_INTERNAL_ENABLED = ConfigOption(
        "security.ssl.internal.enabled",
        "bool",
        True,
        "Mutual TLS with the cluster's CA for gRPC between master and TaskExecutors and for the data "
        "transport between TaskExecutors.",
    )
    SSL_INTERNAL_CERT = ConfigOption(
        "security.ssl.internal.cert",
        "str",
        None,
        "PEM certificate of this process, issued by the cluster's CA (a local cluster generates it).",
    )
    SSL_INTERNAL_KEY = ConfigOption(
        "security.ssl.internal.key",
        "str",
        None,
        "PEM private key of security.ssl.internal.cert.",
    )
    SSL_INTERNAL_CA = ConfigOption(
        "security.ssl.internal.ca",
        "str",
        None,
        "PEM certificate of the cluster's CA: peers must present a certificate it issued.",
    )
    KERBEROS_LOGIN_PRINCIPAL = ConfigOption(
        "security.kerberos.login.principal",
        "str",
        None,
        "Kerberos principal used to submit to YARN (with the keytab).",
    )
    KERBEROS_LOGIN_KEYTAB = ConfigOption(
        "security.kerberos.login.keytab",
        "str",
        None,
        "Keytab file of the Kerberos principal.",
    )
