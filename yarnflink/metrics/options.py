"""Options of the metric reporters and of the REST API's metric fetcher (Flink's ``MetricOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["MetricOptions"]


class MetricOptions:
    """Which reporters run, where the Prometheus endpoint listens, how often metrics are fetched."""

    REPORTERS_LIST = ConfigOption(
        "metrics.reporters",
        "str",
        None,
        "Comma-separated names of the metric reporters to start; unset starts every reporter that has "
        "metrics.reporter.<name>.* keys set. yarnflink has one reporter: 'prom' (Prometheus).",
    )
    PROMETHEUS_FACTORY_CLASS = ConfigOption(
        "metrics.reporter.prom.factory.class",
        "str",
        None,
        "Factory of the 'prom' reporter (accepted for Flink compatibility; setting it enables the Prometheus endpoint).",
    )
    PROMETHEUS_PORT = ConfigOption(
        "metrics.reporter.prom.port",
        "str",
        "9249",
        "Port of the Prometheus endpoint of the master and of each TaskExecutor: a port, a range "
        "('9250-9260') or a list; each process takes the first free one, 0 takes any free port. "
        "Setting it enables the endpoint.",
    )
    PROMETHEUS_HOST = ConfigOption(
        "metrics.reporter.prom.host",
        "str",
        "127.0.0.1",
        "Address the Prometheus endpoint binds to (yarnflink: loopback by default; Flink binds every interface).",
    )
    METRIC_FETCHER_UPDATE_INTERVAL = ConfigOption(
        "metrics.fetcher.update-interval",
        "duration",
        "10 s",
        "How often the REST API and dashboard fetch task and TaskExecutor metrics from the TaskExecutors "
        "(requests in between are answered from the last fetch).",
    )
