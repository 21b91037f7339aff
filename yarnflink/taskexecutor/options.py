"""Options of a TaskExecutor process (Flink's ``TaskManagerOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["TaskManagerOptions"]


class TaskManagerOptions:
    """A TaskExecutor's slots, address and the resources it offers."""

    JOBMASTER_RECONNECT_TIMEOUT = ConfigOption(
        "high-availability.jobmaster.reconnect-timeout",
        "duration",
        "60 s",
        "HA: how long a TaskExecutor keeps a job's slots and tasks running while the job has no "
        "JobMaster leader (its JobMaster lost, or a new leader not yet reported to); if no leader "
        "claims them within this time, the tasks are failed and the slots freed.",
    )
    NUM_TASK_SLOTS = ConfigOption(
        "taskmanager.numberOfTaskSlots",
        "int",
        1,
        "Number of task slots each TaskManager offers.",
        min_value=1,
    )
    TOTAL_PROCESS_MEMORY = ConfigOption(
        "taskmanager.memory.process.size",
        "memory",
        "1728m",
        "Total process memory of a TaskManager.",
    )
    HOST = ConfigOption(
        "taskmanager.host",
        "str",
        None,
        "Address the TaskManager advertises to the cluster (default: detected).",
    )
    RPC_PORT = ConfigOption(
        "taskmanager.rpc.port",
        "int",
        0,
        "Port of the TaskManager's RPC endpoint; 0 picks a free port.",
        min_value=0,
        max_value=65535,
    )
    CPU_CORES = ConfigOption(
        "taskmanager.cpu.cores",
        "float",
        None,
        "CPU cores a TaskManager offers to its slots (default: its number of slots).",
        min_value=0,
    )
    TASK_HEAP_MEMORY = ConfigOption(
        "taskmanager.memory.task.heap.size",
        "memory",
        None,
        "Task heap a TaskManager offers to its slots (default: derived from taskmanager.memory.process.size "
        "as Flink does; 384 mb for 1728m).",
    )
    TASK_OFF_HEAP_MEMORY = ConfigOption(
        "taskmanager.memory.task.off-heap.size",
        "memory",
        "0 bytes",
        "Task off-heap memory a TaskManager offers to its slots.",
    )
    MANAGED_MEMORY_SIZE = ConfigOption(
        "taskmanager.memory.managed.size",
        "memory",
        None,
        "Managed memory a TaskManager offers to its slots (default: 0.4 of its Flink memory; 512 mb for 1728m).",
    )
    TASK_CANCELLATION_INTERVAL = ConfigOption(
        "task.cancellation.interval",
        "duration",
        "30 s",
        "Time between two interrupts of a cancelled task whose thread has not ended (an exception raised "
        "asynchronously in the task thread; the first comes within 1 s of the cancel). A job's configuration "
        "may set it for its own tasks.",
    )
    TASK_CANCELLATION_TIMEOUT = ConfigOption(
        "task.cancellation.timeout",
        "duration",
        "3 min",
        "A cancelled task whose thread has not ended this long after the cancel is a fatal error of its "
        "TaskManager: the process logs why and exits, and a new one replaces it; 0 disables the timeout. "
        "A job's configuration may set it for its own tasks.",
    )
