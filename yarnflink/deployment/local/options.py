"""Options of a local cluster (processes on this machine)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["LocalClusterOptions"]


class LocalClusterOptions:
    """A local cluster's size."""

    NUMBER_TASKMANAGER = ConfigOption(
        "local.number-taskmanager",
        "int",
        2,
        "Number of TaskManagers a local cluster starts.",
        min_value=1,
    )
