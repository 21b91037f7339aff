"""Every configuration option yarnflink knows, gathered from the components that declare them.

Each package declares its options beside its code (``yarnflink/<package>/options.py``, importing
only ``yarnflink.common.config``); this module registers all of them in the process's registry
``yarnflink.common.config.OPTIONS``, against which ``Configuration`` validates keys (unknown keys
and bad values are errors naming the key), and which the REST API and the docs list.
``yarnflink/__init__.py`` imports this module first, so the registry is complete as soon as any
yarnflink module is imported. A new options class is added to ``OPTION_GROUPS``.
"""

from __future__ import annotations

from yarnflink.api.options import DeploymentOptions
from yarnflink.checkpoint.options import CheckpointingOptions, S3Options, SavepointConfigOptions
from yarnflink.client.options import ClientOptions
from yarnflink.common.config import OPTIONS
from yarnflink.deployment.local.options import LocalClusterOptions
from yarnflink.deployment.yarn.options import YarnConfigOptions
from yarnflink.dispatcher.options import RestOptions, WebOptions
from yarnflink.highavailability.options import HighAvailabilityOptions, JobResultStoreOptions
from yarnflink.jobgraph.options import CoreOptions, ExecutionOptions, PipelineOptions
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.metrics.options import MetricOptions
from yarnflink.network.options import NettyShuffleEnvironmentOptions
from yarnflink.resourcemanager.options import ClusterOptions, HeartbeatManagerOptions, ResourceManagerOptions
from yarnflink.scheduler.options import (
    BatchExecutionOptions,
    RestartStrategyOptions,
    SchedulerOptions,
    SlowTaskDetectorOptions,
)
from yarnflink.security.options import SecurityOptions
from yarnflink.spark.options import SparkOptions
from yarnflink.state.options import IncrementalCheckpointOptions, RocksDBOptions, StateBackendOptions
from yarnflink.taskexecutor.options import TaskManagerOptions

__all__ = ["OPTIONS", "OPTION_GROUPS"]

#: Every options class, in the order the REST API and the docs list them.
OPTION_GROUPS: tuple[type, ...] = (
    CoreOptions,
    PipelineOptions,
    ExecutionOptions,
    DeploymentOptions,
    ClientOptions,
    TaskManagerOptions,
    NettyShuffleEnvironmentOptions,
    JobManagerOptions,
    RestOptions,
    WebOptions,
    HeartbeatManagerOptions,
    ClusterOptions,
    ResourceManagerOptions,
    RestartStrategyOptions,
    SchedulerOptions,
    BatchExecutionOptions,
    SlowTaskDetectorOptions,
    HighAvailabilityOptions,
    JobResultStoreOptions,
    YarnConfigOptions,
    LocalClusterOptions,
    StateBackendOptions,
    IncrementalCheckpointOptions,
    RocksDBOptions,
    CheckpointingOptions,
    SavepointConfigOptions,
    S3Options,
    MetricOptions,
    SecurityOptions,
    SparkOptions,
)

OPTIONS.register(*OPTION_GROUPS)
