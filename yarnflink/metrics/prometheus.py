"""Flink's PrometheusReporter: an HTTP endpoint (``/metrics``) in the master and in each
TaskExecutor that Prometheus scrapes.

Configured with Flink's keys: the reporter ``prom`` starts when ``metrics.reporters`` names it, or
when ``metrics.reporters`` is unset and ``metrics.reporter.prom.port`` or
``metrics.reporter.prom.factory.class`` is set. ``metrics.reporter.prom.port`` is a port, a range
``9250-9260`` or a list ``9250,9252`` (each process takes the first free one; ``0`` takes any free
port). Unlike Flink, it binds ``metrics.reporter.prom.host`` (default loopback only).

Metric names are Flink's: ``flink_<scope>_<name>`` with every character Prometheus does not allow
replaced by ``_`` (``flink_taskmanager_job_task_numRecordsIn{job_id=...,task_id=...,subtask_index=...}``,
``flink_taskmanager_Status_Python_CPU_Load{tm_id=...}``). As in Flink, counters are exposed as
gauges.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from yarnflink.common.config import Configuration
from yarnflink.metrics.options import MetricOptions

log = logging.getLogger(__name__)

REPORTER = "prom"
PREFIX = "flink_"
_INVALID = re.compile(r"[^a-zA-Z0-9_:]")


@dataclass(frozen=True)
class Sample:
    """One value: ``name`` is scope and metric (``taskmanager_job_task_numRecordsIn``)."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


def metric_name(name: str) -> str:
    return PREFIX + _INVALID.sub("_", name)


def parse_ports(spec: str) -> list[int]:
    """``"9249"``, ``"9250-9260"``, ``"9250,9255-9256"``, ``"0"`` -> ports to try, in order."""
    ports: list[int] = []
    for part in str(spec).split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"invalid port or port range {part!r}") from None
        if not (0 <= a <= 65535 and 0 <= b <= 65535 and a <= b):
            raise ValueError(f"invalid port or port range {part!r}")
        ports.extend(range(a, b + 1))
    if not ports:
        raise ValueError(f"no port in {spec!r}")
    return ports


def reporter_enabled(config: Configuration) -> bool:
    names = config.get(MetricOptions.REPORTERS_LIST)
    if names:
        return REPORTER in [s.strip() for s in str(names).split(",")]
    return config.contains(MetricOptions.PROMETHEUS_PORT) or bool(config.get(MetricOptions.PROMETHEUS_FACTORY_CLASS))


class _Collector:
    def __init__(self, collect: Callable[[], Iterable[Sample]]) -> None:
        self._collect = collect

    def collect(self) -> Iterator[Any]:
        # deferred: prometheus_client, with a Prometheus reporter only
        from prometheus_client.core import GaugeMetricFamily

        try:
            samples = list(self._collect())
        except Exception:  # noqa: BLE001 - a scrape must never take the process down
            log.warning("collecting metrics for Prometheus failed", exc_info=True)
            return
        families: dict[str, tuple[list[str], list[Sample]]] = {}
        for s in samples:
            name = metric_name(s.name)
            fam = families.get(name)
            if fam is None:
                fam = families[name] = (sorted(s.labels), [])
            fam[1].append(s)
        for name, (label_names, members) in families.items():
            g = GaugeMetricFamily(name, name, labels=label_names)
            for s in members:
                g.add_metric([str(s.labels.get(k, "")) for k in label_names], float(s.value))
            yield g


class PrometheusReporter:
    def __init__(self, host: str, ports: list[int], collect: Callable[[], Iterable[Sample]]) -> None:
        self.host = host
        self.ports = ports
        self._collect = collect
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}" if self.port else ""

    def start(self) -> bool:
        """Binds the first free port of ``ports``; False (and a warning) if none is free."""
        # deferred: prometheus_client, with a Prometheus reporter only
        from prometheus_client import CollectorRegistry, start_http_server

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self._collect))  # type: ignore[arg-type]
        last: OSError | None = None
        for port in self.ports:
            try:
                self._server, self._thread = start_http_server(port, addr=self.host, registry=registry)
            except OSError as e:
                last = e
                continue
            self.port = int(self._server.server_port)
            log.info("PrometheusReporter serving on http://%s:%d/metrics", self.host, self.port)
            return True
        log.warning("PrometheusReporter could not bind any port of %s on %s: %s", _show(self.ports), self.host, last)
        return False

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def _show(ports: list[int]) -> str:
    return str(ports[0]) if len(ports) == 1 else f"{ports[0]}..{ports[-1]}"


_active: PrometheusReporter | None = None


def start_reporter(config: Configuration, collect: Callable[[], Iterable[Sample]]) -> PrometheusReporter | None:
    """Starts this process's PrometheusReporter if the configuration asks for one."""
    global _active
    if not reporter_enabled(config):
        return None
    host = config.get(MetricOptions.PROMETHEUS_HOST) or "127.0.0.1"
    try:
        ports = parse_ports(config.get(MetricOptions.PROMETHEUS_PORT) or "9249")
    except ValueError as e:
        log.warning("PrometheusReporter not started: metrics.reporter.prom.port: %s", e)
        return None
    reporter = PrometheusReporter(host, ports, collect)
    if not reporter.start():
        return None
    _active = reporter
    return reporter


def active_reporter_address() -> str:
    """host:port of this process's PrometheusReporter, or ``""``."""
    return _active.address if _active is not None else ""


def stop_reporter(reporter: PrometheusReporter | None) -> None:
    global _active
    if reporter is None:
        return
    reporter.stop()
    if _active is reporter:
        _active = None
