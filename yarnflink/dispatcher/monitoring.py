"""The master's Prometheus endpoint (``metrics.reporter.prom.*``): the master process's
``Status.Python.*`` metrics, the cluster's (Flink's ``jobmanager`` scope: registered
TaskExecutors, slots, running jobs) and each running job's (``jobmanager_job`` scope: uptime,
restarts, checkpoints). Task metrics are exported by the TaskExecutors' own endpoints.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from yarnflink.dispatcher.views import job_metrics
from yarnflink.metrics import names as n
from yarnflink.metrics.process import process_metrics
from yarnflink.metrics.prometheus import PrometheusReporter, Sample, start_reporter

if TYPE_CHECKING:
    from yarnflink.dispatcher.dispatcher import Dispatcher
    from yarnflink.resourcemanager.gateway import ResourceOverview

JobFigures = tuple[str, str, dict[str, float]]  # job id, job name, its jobmanager_job metrics


def start_master_reporter(d: Dispatcher) -> PrometheusReporter | None:
    return start_reporter(d.config, lambda: master_samples(d))


async def _running_jobs(d: Dispatcher) -> list[JobFigures]:
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


async def _cluster_figures(d: Dispatcher) -> tuple[ResourceOverview, list[JobFigures]]:
    """On the Dispatcher's loop: the ResourceManager and the JobMasters answer through their gateways."""
    return await d.resource_manager_gateway.request_resource_overview(), await _running_jobs(d)


def master_samples(d: Dispatcher) -> list[Sample]:
    """Called on the reporter's HTTP thread: hands over to the Dispatcher's loop once and waits."""
    samples = [Sample("jobmanager_" + k, v) for k, v in process_metrics().snapshot().items()]
    cluster, jobs = d.call(partial(_cluster_figures, d), timeout=5.0)
    samples += [
        Sample("jobmanager_" + n.NUM_REGISTERED_TASK_MANAGERS, float(cluster.number_task_managers)),
        Sample("jobmanager_" + n.TASK_SLOTS_TOTAL, float(cluster.number_registered_slots)),
        Sample("jobmanager_" + n.TASK_SLOTS_AVAILABLE, float(cluster.number_free_slots)),
        Sample("jobmanager_" + n.NUM_RUNNING_JOBS, float(len(jobs))),
    ]
    for job_id, name, metrics in jobs:
        labels = {"job_id": job_id, "job_name": name}
        samples += [Sample("jobmanager_job_" + k, v, labels) for k, v in metrics.items()]
    return samples
