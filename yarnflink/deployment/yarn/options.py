"""Options of the YARN deployment (Flink's ``YarnConfigOptions``; docs/yarn.md)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["YarnConfigOptions"]


class YarnConfigOptions:
    """The YARN application and its containers."""

    APPLICATION_QUEUE = ConfigOption(
        "yarn.application.queue",
        "str",
        None,
        "YARN queue of the application.",
    )
    APPLICATION_NAME = ConfigOption(
        "yarn.application.name",
        "str",
        None,
        "YARN application name (default: 'yarnflink <mode>').",
    )
    APPLICATION_ATTEMPTS = ConfigOption(
        "yarn.application-attempts",
        "int",
        1,
        "How often YARN starts the ApplicationMaster (skein max_attempts).",
        min_value=1,
    )
    VCORES = ConfigOption(
        "yarn.containers.vcores",
        "int",
        None,
        "vcores of a TaskExecutor container (default: taskmanager.numberOfTaskSlots).",
        min_value=1,
    )
    SHIP_ARCHIVES = ConfigOption(
        "yarn.ship-archives",
        "str",
        None,
        "Comma-separated packed Python environments (conda-pack/venv-pack .tar.gz) shipped "
        "to every container; the first one's bin/python runs yarnflink.",
    )
    PYTHON_EXECUTABLE = ConfigOption(
        "yarn.python.executable",
        "str",
        None,
        "Python interpreter present on every node (default: python3, or the first shipped archive's bin/python).",
    )
