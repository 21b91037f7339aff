"""YARN deployment through skein (docs/yarn.md): the application spec (``spec``), the
ResourceManagerDriver that runs TaskExecutors as containers (``driver``), the ApplicationMaster
side (``master``; with HA its watcher, ``supervisor``) and the client side: session, per-job and
application submission and following the application's master (``client``), the CLI commands
(``cli``), container logs (``logs``) and shipping the client's environment (``environment``).
"""

from __future__ import annotations

from typing import Any


class YarnDeploymentError(Exception):
    """A problem the user can fix (missing skein, no HDFS, unknown application); printed without
    a traceback by the CLI."""


def import_skein() -> Any:
    try:
        import skein  # deferred: skein, on the yarn target only
    except ImportError:
        raise YarnDeploymentError(
            "the YARN target needs skein: pip install 'skein>=0.8' "
            "(and a Hadoop client configuration in HADOOP_CONF_DIR)"
        ) from None
    return skein
