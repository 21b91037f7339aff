"""Options of high availability (Flink's ``HighAvailabilityOptions`` and ``JobResultStoreOptions``; docs/HA.md)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["HighAvailabilityOptions", "JobResultStoreOptions"]


class HighAvailabilityOptions:
    """Leader election and HA metadata in ZooKeeper and the storageDir."""

    HA_MODE = ConfigOption(
        "high-availability.type",
        "enum",
        "NONE",
        "NONE: one master, no failover. ZOOKEEPER: masters elect a leader in ZooKeeper; JobGraphs, job "
        "results and checkpoint pointers survive the leader.",
        choices=("NONE", "ZOOKEEPER"),
    )
    HA_ZOOKEEPER_QUORUM = ConfigOption(
        "high-availability.zookeeper.quorum",
        "str",
        None,
        "ZooKeeper servers as host:port,host:port,... (required with high-availability.type: ZOOKEEPER).",
    )
    HA_ZOOKEEPER_ROOT = ConfigOption(
        "high-availability.zookeeper.path.root",
        "str",
        "/yarnflink",
        "ZooKeeper node under which every cluster keeps its HA data.",
    )
    HA_CLUSTER_ID = ConfigOption(
        "high-availability.cluster-id",
        "str",
        "/default",
        "Identifies the cluster: its HA data lives under path.root/cluster-id in ZooKeeper and under "
        "storageDir/cluster-id on the file system.",
    )
    HA_STORAGE_PATH = ConfigOption(
        "high-availability.storageDir",
        "str",
        None,
        "File system URL (fsspec: hdfs://, s3://, file://) for HA data too big for ZooKeeper: JobGraphs "
        "and the job result store (required with high-availability.type: ZOOKEEPER).",
    )
    ZOOKEEPER_SESSION_TIMEOUT = ConfigOption(
        "high-availability.zookeeper.client.session-timeout",
        "duration",
        "60000 ms",
        "ZooKeeper session timeout: a master whose session expires has lost its leadership.",
    )
    ZOOKEEPER_CONNECTION_TIMEOUT = ConfigOption(
        "high-availability.zookeeper.client.connection-timeout",
        "duration",
        "15000 ms",
        "How long to wait for the first connection to ZooKeeper.",
    )
    ZOOKEEPER_RETRY_WAIT = ConfigOption(
        "high-availability.zookeeper.client.retry-wait",
        "duration",
        "5000 ms",
        "Initial pause before a failed ZooKeeper operation is retried (doubling each time).",
    )
    ZOOKEEPER_MAX_RETRY_ATTEMPTS = ConfigOption(
        "high-availability.zookeeper.client.max-retry-attempts",
        "int",
        3,
        "How often a failed ZooKeeper operation is retried.",
        min_value=0,
    )
    ZOOKEEPER_TOLERATE_SUSPENDED_CONNECTIONS = ConfigOption(
        "high-availability.zookeeper.client.tolerate-suspended-connections",
        "bool",
        False,
        "Keep leadership while the ZooKeeper connection is suspended (for a third of the session timeout, "
        "after which the session may expire) instead of giving it up at once.",
    )


class JobResultStoreOptions:
    """Where ended jobs' results are kept until their cleanup is done."""

    STORAGE_PATH = ConfigOption(
        "job-result-store.storage-path",
        "str",
        None,
        "Where the job result store keeps its entries (default: storageDir/job-result-store/cluster-id).",
    )
    DELETE_ON_COMMIT = ConfigOption(
        "job-result-store.delete-on-commit",
        "bool",
        True,
        "Delete a job's result entry once its cleanup is done, instead of keeping it marked clean.",
    )
