"""Options of the master process and its JobMasters (Flink's ``JobManagerOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["JobManagerOptions"]


class JobManagerOptions:
    """The master's RPC address and size, and what a JobMaster does with slots and failures."""

    ADDRESS = ConfigOption(
        "jobmanager.rpc.address",
        "str",
        "localhost",
        "Address of the JobManager's RPC endpoint.",
    )
    PORT = ConfigOption(
        "jobmanager.rpc.port",
        "int",
        6123,
        "Port of the JobManager's RPC endpoint.",
        min_value=0,
        max_value=65535,
    )
    TOTAL_PROCESS_MEMORY = ConfigOption(
        "jobmanager.memory.process.size",
        "memory",
        "1600m",
        "Total process memory of the master (the YARN ApplicationMaster container).",
    )
    RECONCILIATION_TIMEOUT = ConfigOption(
        "high-availability.jobmaster.reconciliation-timeout",
        "duration",
        "10 s",
        "HA: how long a JobMaster that took over a running job waits for the TaskExecutors to report "
        "the tasks they kept running before it decides (subtasks nobody reported fail over by region). "
        "It decides at once when every subtask is reported.",
    )
    SLOT_REQUEST_TIMEOUT = ConfigOption(
        "slot.request.timeout",
        "duration",
        "300 s",
        "How long a job waits for the slots it requested before failing.",
    )
    SLOT_IDLE_TIMEOUT = ConfigOption(
        "slot.idle.timeout",
        "duration",
        "50 s",
        "How long a JobMaster keeps a slot whose tasks have ended (for the next region or a restart) "
        "before giving it back.",
    )
    MAX_EXCEPTION_HISTORY_SIZE = ConfigOption(
        "web.exception-history-size",
        "int",
        16,
        "Number of failures a job's exception history keeps (GET /jobs/:jobid/exceptions).",
        min_value=1,
    )
