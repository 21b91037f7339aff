"""Options of the cluster client (Flink's ``ClientOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["ClientOptions"]


class ClientOptions:
    """The client's requests to the cluster."""

    CLIENT_TIMEOUT = ConfigOption(
        "client.timeout",
        "duration",
        "60 s",
        "Timeout of the client's requests to the cluster.",
    )
