"""yarnflink's PyFlink namespace: PyFlink DataStream programs (``from pyflink.datastream import
StreamExecutionEnvironment``) run unchanged on yarnflink, under ``yarnflink run job.py``,
``yarnflink info job.py`` and ``python job.py`` (an embedded local cluster, as ``yarnflink run``).

A thin façade: every name is yarnflink's own API (``yarnflink.api``); what yarnflink cannot do
raises ``UnsupportedFeatureError`` at the call, naming what to use instead. docs/PYFLINK.md lists
each API as supported, different or refused.

When Apache Flink's ``apache-flink`` distribution is installed in the same environment, both
packages share this directory: importing fails with a message naming both (never silently one).
"""

import os as _os

from yarnflink.api.pyflink_conflict import ALLOW_ENV as _ALLOW_ENV
from yarnflink.api.pyflink_conflict import apache_flink_installed as _apache_flink_installed
from yarnflink.api.pyflink_conflict import conflict_message as _conflict_message

_found = _apache_flink_installed()
if _found is not None and not _os.environ.get(_ALLOW_ENV):
    raise ImportError(_conflict_message(*_found), name="pyflink")

from yarnflink.api.environment import set_fallback_executor_factory as _set_fallback  # noqa: E402
from yarnflink.version import __version__ as _yarnflink_version  # noqa: E402

#: marks this package as yarnflink's (apache-flink's ``pyflink`` has no such attribute)
__yarnflink__ = _yarnflink_version


def _embedded_cluster_executor():  # type: ignore[no-untyped-def]
    """The executor of `python job.py` (yarnflink.deployment.local.embedded). Imported when first
    needed: a TaskExecutor that unpickles a function referring to pyflink names loads no client."""
    from yarnflink.deployment.local.embedded import EmbeddedClusterExecutor

    return EmbeddedClusterExecutor()


# `python job.py`: an environment without an executor runs its jobs on a local cluster
_set_fallback(_embedded_cluster_executor)
