"""ResourceProfile (what a slot offers or a request needs) and WorkerSpec (what one TaskExecutor
offers in total), with Flink's TaskExecutor memory model for the defaults. Pure.

Profiles are accounting: a Python TaskExecutor does not enforce CPU or memory per slot (Flink does
not isolate CPU either); they decide which request fits where.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from yarnflink.taskexecutor.options import TaskManagerOptions

MB = 1 << 20


@dataclass(frozen=True, order=True)
class ResourceProfile:
    """Flink's ResourceProfile without network memory and extended resources. All zero is
    ``UNKNOWN``: a request that takes any default slot."""

    cpu_cores: float = 0.0
    task_heap_mb: int = 0
    task_off_heap_mb: int = 0
    managed_memory_mb: int = 0

    @property
    def is_unknown(self) -> bool:
        return self == UNKNOWN

    def fits_into(self, other: ResourceProfile) -> bool:
        return (
            self.cpu_cores <= other.cpu_cores + 1e-9
            and self.task_heap_mb <= other.task_heap_mb
            and self.task_off_heap_mb <= other.task_off_heap_mb
            and self.managed_memory_mb <= other.managed_memory_mb
        )

    def __add__(self, o: ResourceProfile) -> ResourceProfile:
        return ResourceProfile(
            round(self.cpu_cores + o.cpu_cores, 6),
            self.task_heap_mb + o.task_heap_mb,
            self.task_off_heap_mb + o.task_off_heap_mb,
            self.managed_memory_mb + o.managed_memory_mb,
        )

    def __sub__(self, o: ResourceProfile) -> ResourceProfile:
        return ResourceProfile(
            round(self.cpu_cores - o.cpu_cores, 6),
            self.task_heap_mb - o.task_heap_mb,
            self.task_off_heap_mb - o.task_off_heap_mb,
            self.managed_memory_mb - o.managed_memory_mb,
        )

    def divide(self, n: int) -> ResourceProfile:
        return ResourceProfile(
            round(self.cpu_cores / n, 6),
            self.task_heap_mb // n,
            self.task_off_heap_mb // n,
            self.managed_memory_mb // n,
        )

    def utilization_of(self, total: ResourceProfile) -> float:
        """The largest share of any dimension of ``total`` that this profile takes."""
        shares = [
            used / cap
            for used, cap in (
                (self.cpu_cores, total.cpu_cores),
                (self.task_heap_mb, total.task_heap_mb),
                (self.task_off_heap_mb, total.task_off_heap_mb),
                (self.managed_memory_mb, total.managed_memory_mb),
            )
            if cap > 0
        ]
        return max(shares, default=0.0)

    def to_json(self) -> dict[str, Any]:
        """Flink's REST shape of a ResourceProfile (memory in bytes)."""
        return {
            "cpuCores": self.cpu_cores,
            "taskHeapMemory": self.task_heap_mb * MB,
            "taskOffHeapMemory": self.task_off_heap_mb * MB,
            "managedMemory": self.managed_memory_mb * MB,
            "networkMemory": 0,
            "extendedResources": {},
        }

    @staticmethod
    def of_slot_sharing_group(resources: Mapping[str, Any] | None) -> ResourceProfile:
        """From the JobGraph's ``slotSharingGroups`` entry (``cpuCores``, ``taskHeapMemoryMB``, ...)."""
        if not resources:
            return UNKNOWN
        return ResourceProfile(
            float(resources.get("cpuCores") or 0.0),
            int(resources.get("taskHeapMemoryMB") or 0),
            int(resources.get("taskOffHeapMemoryMB") or 0),
            int(resources.get("managedMemoryMB") or 0),
        )


UNKNOWN = ResourceProfile()


@dataclass(frozen=True)
class WorkerSpec:
    """What one TaskExecutor offers: its total resources split into ``num_slots`` default slots."""

    total: ResourceProfile
    num_slots: int

    @property
    def default_slot(self) -> ResourceProfile:
        return self.total.divide(self.num_slots)


# Flink's TaskExecutor memory model (TaskExecutorProcessUtils), for the defaults of a process size.
JVM_OVERHEAD_FRACTION, JVM_OVERHEAD_MIN_MB, JVM_OVERHEAD_MAX_MB = 0.1, 192, 1024
METASPACE_MB = 256
FRAMEWORK_HEAP_MB = FRAMEWORK_OFF_HEAP_MB = 128
NETWORK_FRACTION, NETWORK_MIN_MB, NETWORK_MAX_MB = 0.1, 64, 1024
MANAGED_FRACTION = 0.4


def worker_spec_from_config(config: Any) -> WorkerSpec:
    """The WorkerSpec of a TaskExecutor started with ``config`` (a ``Configuration``): explicit
    ``taskmanager.cpu.cores`` / ``taskmanager.memory.task.heap.size`` / ``...managed.size`` /
    ``...task.off-heap.size`` win, the rest is derived from ``taskmanager.memory.process.size``
    as Flink does (1728m gives 384 MB task heap and 512 MB managed memory)."""
    slots = int(config.get(TaskManagerOptions.NUM_TASK_SLOTS))
    cpu = config.get(TaskManagerOptions.CPU_CORES)
    process_mb = int(config.get(TaskManagerOptions.TOTAL_PROCESS_MEMORY)) // MB
    overhead = min(max(process_mb * JVM_OVERHEAD_FRACTION, JVM_OVERHEAD_MIN_MB), JVM_OVERHEAD_MAX_MB)
    flink_mb = max(0, int(process_mb - overhead - METASPACE_MB))
    network = int(min(max(flink_mb * NETWORK_FRACTION, NETWORK_MIN_MB), NETWORK_MAX_MB))
    off_heap = config.get(TaskManagerOptions.TASK_OFF_HEAP_MEMORY)
    off_heap_mb = int(off_heap) // MB if off_heap is not None else 0
    managed = config.get(TaskManagerOptions.MANAGED_MEMORY_SIZE)
    managed_mb = int(managed) // MB if managed is not None else int(flink_mb * MANAGED_FRACTION)
    heap = config.get(TaskManagerOptions.TASK_HEAP_MEMORY)
    heap_mb = (
        int(heap) // MB
        if heap is not None
        else max(0, flink_mb - FRAMEWORK_HEAP_MB - FRAMEWORK_OFF_HEAP_MB - network - managed_mb - off_heap_mb)
    )
    total = ResourceProfile(float(cpu) if cpu is not None else float(slots), heap_mb, off_heap_mb, managed_mb)
    return WorkerSpec(total, slots)
