"""The master's Prometheus endpoint (``metrics.reporter.prom.*``): the master process's
``Status.Python.*`` metrics, the cluster's (Flink's ``jobmanager`` scope: registered
TaskExecutors, slots, running jobs) and each running job's (``jobmanager_job`` scope: uptime,
restarts, checkpoints). Task metrics are exported by the TaskExecutors' own endpoints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from yarnflink.dispatcher.views import job_metrics
from yarnflink.metrics import names as n
from yarnflink.metrics.process import process_metrics
from yarnflink.metrics.prometheus import PrometheusReporter, Sample, start_reporter

if TYPE_CHECKING:
    from yarnflink.dispatcher.dispatcher import Dispatcher


def start_master_reporter(d: Dispatcher) -> PrometheusReporter | None:
    return start_reporter(d.config, lambda: master_samples(d))


async def _running_jobs(d: Dispatcher) -> list[tuple[str, str, dict[str, float]]]:
    out = []
    for e in list(d.jobs.values()):
        gateway = e.gateway
        if e.archive is not None or gateway is None:
            continue
        try:
            s = await gateway.request_monitoring_snapshot()
        except Exception:  # noqa: BLE001 - the job ended meanwhile
            continue
        out.append((e.job_id, e.name, job_metrics(s["details"], s["checkpoints"], s["num_restarts"])))
    return out


def master_samples(d: Dispatcher) -> list[Sample]:
    """Called on the reporter's HTTP thread; reads the components on their own loops."""
    samples = [Sample("jobmanager_" + k, v) for k, v in process_metrics().snapshot().items()]
    tms, total, free = d.rm.call(d.rm.slot_totals, timeout=5.0)
    jobs = d.call(lambda: _running_jobs(d), timeout=5.0)
    samples += [
        Sample("jobmanager_" + n.NUM_REGISTERED_TASK_MANAGERS, float(tms)),
        Sample("jobmanager_" + n.TASK_SLOTS_TOTAL, float(total)),
        Sample("jobmanager_" + n.TASK_SLOTS_AVAILABLE, float(free)),
        Sample("jobmanager_" + n.NUM_RUNNING_JOBS, float(len(jobs))),
    ]
    for job_id, name, metrics in jobs:
        labels = {"job_id": job_id, "job_name": name}
        samples += [Sample("jobmanager_job_" + k, v, labels) for k, v in metrics.items()]
    return samples
