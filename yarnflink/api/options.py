"""Options of the DataStream API's ``execute()`` (Flink's ``DeploymentOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["DeploymentOptions"]


class DeploymentOptions:
    """How ``execute()`` hands the job to the cluster."""

    ATTACHED = ConfigOption(
        "execution.attached",
        "bool",
        True,
        "Whether execute() waits for the job to finish (false: submit and return, as `yarnflink run -d`).",
    )
