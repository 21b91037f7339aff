"""What the Dispatcher checks of a submitted job before a JobMaster exists: the job's
configuration over the cluster's, and the error a job that cannot run gets (REST: 400). Apart from
``jobmaster.py`` so that a master serves REST without loading the JobMaster (its scheduler,
checkpointing and operators: loaded at the first job, or on a thread once the master is up)."""

from __future__ import annotations

from yarnflink.common.config import ConfigError, Configuration
from yarnflink.jobgraph.jobgraph import JobGraph


class JobSubmissionException(ValueError):
    """The job cannot run as submitted and configured (the REST API answers 400)."""


def job_configuration(cluster: Configuration | None, job_graph: JobGraph) -> Configuration:
    """The cluster's configuration overridden by the job's own entries (as in Flink)."""
    config = cluster.copy() if cluster is not None else Configuration()
    for key, value in job_graph.config.items():
        try:
            config.set(key, value, source="the job's configuration")
        except ConfigError as e:
            raise JobSubmissionException(str(e)) from None
    return config
