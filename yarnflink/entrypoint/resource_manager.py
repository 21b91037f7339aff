"""The master's ResourceManager as its process makes it: with the local driver (TaskExecutor
processes on this machine) when it starts local TaskExecutors, with a given driver (YARN), or
standalone. Apart from ``master.py`` and light to import, so that a local master can start it,
and with it its TaskExecutors, before it loads its REST server (``local_master.py``)."""

from __future__ import annotations

from pathlib import Path

from yarnflink.common.config import Configuration
from yarnflink.deployment.local.driver import LocalProcessDriver
from yarnflink.jobmaster.options import JobManagerOptions
from yarnflink.resourcemanager.driver import ResourceManagerDriver
from yarnflink.resourcemanager.options import ResourceManagerOptions
from yarnflink.resourcemanager.resourcemanager import ResourceManager
from yarnflink.taskexecutor.options import TaskManagerOptions


def create_resource_manager(
    config: Configuration,
    *,
    local_taskexecutors: int | None,
    workdir: Path | None,
    inherit_stdout: bool = False,
    driver: ResourceManagerDriver | None = None,
    high_availability: bool = False,
) -> ResourceManager:
    """With ``local_taskexecutors`` (and no given driver) the ResourceManager is active: it starts
    that many TaskExecutor processes at once and keeps them as the minimum
    (``slotmanager.number-of-slots.min`` = N x slots unless set)."""
    host = config.get(JobManagerOptions.ADDRESS) or "127.0.0.1"
    if host == "localhost":
        host = "127.0.0.1"
    if driver is None and local_taskexecutors is not None:
        driver = LocalProcessDriver(config, workdir or Path.cwd(), inherit_stdout=inherit_stdout)
    min_slots = None
    if local_taskexecutors is not None and not config.contains(ResourceManagerOptions.MIN_SLOT_NUM):
        min_slots = local_taskexecutors * int(config.get(TaskManagerOptions.NUM_TASK_SLOTS))
    return ResourceManager(
        host,
        int(config.get(JobManagerOptions.PORT)),
        config=config,
        driver=driver,
        min_slots=min_slots,
        high_availability=high_availability,
    )
