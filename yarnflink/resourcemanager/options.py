"""Options of the ResourceManager, its SlotManager and the heartbeats between components
(Flink's ``ResourceManagerOptions``, ``ClusterOptions`` and ``HeartbeatManagerOptions``).
"""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["HeartbeatManagerOptions", "ClusterOptions", "ResourceManagerOptions"]


class HeartbeatManagerOptions:
    """Heartbeats between TaskExecutors and the ResourceManager / JobMasters."""

    HEARTBEAT_INTERVAL = ConfigOption(
        "heartbeat.interval",
        "duration",
        "10 s",
        "Interval between heartbeats (TaskManager <-> ResourceManager / JobMaster).",
    )
    HEARTBEAT_TIMEOUT = ConfigOption(
        "heartbeat.timeout",
        "duration",
        "50 s",
        "A peer that sent no heartbeat for this long is considered lost.",
    )
    HEARTBEAT_RPC_FAILURE_THRESHOLD = ConfigOption(
        "heartbeat.rpc-failure-threshold",
        "int",
        2,
        "Number of consecutive heartbeat RPCs that fail because the target is unreachable before the "
        "target is considered lost (detection after about heartbeat.interval times this); -1 disables it.",
        min_value=-1,
    )


class ClusterOptions:
    """How slots are spread and shaped across the cluster."""

    EVENLY_SPREAD_OUT_SLOTS = ConfigOption(
        "cluster.evenly-spread-out-slots",
        "bool",
        True,
        "Allocate slots from the least used TaskManager instead of filling one TaskManager first. "
        "On by default (Flink: off): a TaskManager's slots share one Python interpreter lock, so a "
        "job's subtasks run in parallel only in different TaskManager processes.",
    )
    ENABLE_FINE_GRAINED_RESOURCE_MANAGEMENT = ConfigOption(
        "cluster.fine-grained-resource-management.enabled",
        "bool",
        False,
        "Carve slots out of a TaskManager's total resources to fit each slot sharing group's "
        "ResourceProfile; otherwise all slots are equal and profiles are ignored.",
    )


class ResourceManagerOptions:
    """How many TaskExecutors the ResourceManager starts, keeps and gives up on."""

    MAX_SLOT_NUM = ConfigOption(
        "slotmanager.number-of-slots.max",
        "int",
        2**31 - 1,
        "Maximum number of slots the cluster allocates (TaskManagers the ResourceManager starts count with "
        "all their slots). No effect on standalone clusters, whose TaskManagers register by themselves.",
        min_value=1,
    )
    MIN_SLOT_NUM = ConfigOption(
        "slotmanager.number-of-slots.min",
        "int",
        0,
        "Minimum number of slots the cluster keeps: TaskManagers for them are started at once and not "
        "released when idle. No effect on standalone clusters. A local session started with -n N "
        "defaults it to N times the slots per TaskManager.",
        min_value=0,
    )
    TASK_MANAGER_TIMEOUT = ConfigOption(
        "resourcemanager.taskmanager-timeout",
        "duration",
        "30 s",
        "A TaskManager the ResourceManager started that has been idle (no allocated slot) this long is "
        "stopped, unless the cluster would drop below slotmanager.number-of-slots.min.",
    )
    TASK_MANAGER_REGISTRATION_TIMEOUT = ConfigOption(
        "resourcemanager.taskmanager-registration.timeout",
        "duration",
        "5 min",
        "A started TaskManager that has not registered within this time is stopped (a failed start) and requested anew.",
    )
    START_WORKER_MAX_FAILURE_RATE = ConfigOption(
        "resourcemanager.start-worker.max-failure-rate",
        "float",
        10.0,
        "Maximum number of failed TaskManager starts per minute; beyond it, starting TaskManagers pauses "
        "for resourcemanager.start-worker.retry-interval.",
        min_value=0,
    )
    START_WORKER_RETRY_INTERVAL = ConfigOption(
        "resourcemanager.start-worker.retry-interval",
        "duration",
        "3 s",
        "How long starting TaskManagers pauses once resourcemanager.start-worker.max-failure-rate is exceeded.",
    )
