"""Options of the REST endpoint and the web dashboard (Flink's ``RestOptions`` and ``WebOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["RestOptions", "WebOptions"]


class RestOptions:
    """Where the REST endpoint listens and how clients reach it."""

    ADDRESS = ConfigOption(
        "rest.address",
        "str",
        "localhost",
        "Address clients use to reach the REST endpoint.",
    )
    PORT = ConfigOption(
        "rest.port",
        "int",
        8081,
        "Port of the REST endpoint (0 picks a free port).",
        min_value=0,
        max_value=65535,
    )
    BIND_ADDRESS = ConfigOption(
        "rest.bind-address",
        "str",
        None,
        "Address the REST server binds to (default: rest.address).",
    )
    AWAIT_LEADER_TIMEOUT = ConfigOption(
        "rest.await-leader-timeout",
        "duration",
        "30000 ms",
        "How long a client of an HA cluster waits for a leading master's REST endpoint (retrying a "
        "standby's 503 or a gone master) before it gives up.",
    )
    SERVER_MAX_CONTENT_LENGTH = ConfigOption(
        "rest.server.max-content-length",
        "memory",
        "100 mb",
        "Largest request body the REST server accepts.",
    )


class WebOptions:
    """The web dashboard."""

    REFRESH_INTERVAL = ConfigOption(
        "web.refresh-interval",
        "duration",
        "3 s",
        "Refresh interval of the web dashboard.",
    )
    CANCEL_ENABLE = ConfigOption(
        "web.cancel.enable",
        "bool",
        True,
        "Whether jobs can be cancelled from the web dashboard.",
    )
