"""Options of the YARN deployment (Flink's ``YarnConfigOptions``; docs/yarn.md)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["CONTAINERIZED_MASTER_ENV_PREFIX", "CONTAINERIZED_TASKMANAGER_ENV_PREFIX", "YarnConfigOptions"]

#: ``containerized.master.env.NAME: value`` sets NAME in the ApplicationMaster's environment and
#: ``containerized.taskmanager.env.NAME`` in every TaskExecutor container's (Flink's keys; e.g.
#: ``containerized.taskmanager.env.CLASSPATH`` for the Hadoop client, ``...env.ARROW_LIBHDFS_DIR``).
CONTAINERIZED_MASTER_ENV_PREFIX = "containerized.master.env."
CONTAINERIZED_TASKMANAGER_ENV_PREFIX = "containerized.taskmanager.env."


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
        "How often YARN starts the ApplicationMaster (skein max_attempts); YARN caps it at the "
        "ResourceManager's yarn.resourcemanager.am.max-attempts (the client warns when it is above).",
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
    ENVIRONMENT_DIR = ConfigOption(
        "yarn.environment.dir",
        "str",
        None,
        "Where the client's packed Python environment is uploaded, once per content hash, when "
        "neither yarn.ship-archives nor yarn.python.executable is set (default: "
        "<fs.defaultFS>/user/<user>/.yarnflink/environments).",
    )
    SHIP_ENVIRONMENT = ConfigOption(
        "yarn.ship-environment",
        "bool",
        True,
        "Pack and ship the client's environment (venv-pack/conda-pack) when neither "
        "yarn.ship-archives nor yarn.python.executable is set; false: the nodes' python3.",
    )
    PER_JOB_RESULT_TIMEOUT = ConfigOption(
        "yarn.per-job.result-timeout",
        "duration",
        "5 min",
        "Attached per-job: how long the master waits, once its job ended, for the client to fetch "
        "the result before it shuts down anyway (a client that went away).",
    )
