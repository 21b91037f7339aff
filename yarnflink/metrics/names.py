"""Metric names, as Flink names them (``docs/METRICS.md`` lists them with their meaning).

Task scope (one per subtask attempt, reported by the TaskExecutor that runs it) uses Flink's task
metric names. Process scope (``Status.*``) follows Flink's ``Status.JVM.*`` names with ``Python``
in place of ``JVM``: a Python process has no heap/non-heap split, so memory is RSS/VMS plus what
Arrow's allocator holds.
"""

from __future__ import annotations

#: Flink's ``Long.MIN_VALUE`` watermark: "no watermark received yet".
MIN_WATERMARK = -(2**63)

# --- task scope: counters (monotonic within one attempt)
NUM_RECORDS_IN = "numRecordsIn"
NUM_RECORDS_OUT = "numRecordsOut"
NUM_BYTES_IN = "numBytesIn"
NUM_BYTES_OUT = "numBytesOut"
ACCUMULATED_BACKPRESSURED_TIME_MS = "accumulatedBackPressuredTimeMs"
# --- task scope: meters and gauges
NUM_RECORDS_IN_PER_SECOND = "numRecordsInPerSecond"
NUM_RECORDS_OUT_PER_SECOND = "numRecordsOutPerSecond"
NUM_BYTES_IN_PER_SECOND = "numBytesInPerSecond"
NUM_BYTES_OUT_PER_SECOND = "numBytesOutPerSecond"
BACKPRESSURED_TIME_MS_PER_SECOND = "backPressuredTimeMsPerSecond"
IS_BACKPRESSURED = "isBackPressured"
CURRENT_INPUT_WATERMARK = "currentInputWatermark"
CURRENT_OUTPUT_WATERMARK = "currentOutputWatermark"
# --- task scope: checkpointing (-1 until the task took part in a checkpoint)
LAST_CHECKPOINT_DURATION = "lastCheckpointDuration"
LAST_CHECKPOINT_SIZE = "lastCheckpointSize"
CHECKPOINT_ALIGNMENT_TIME = "checkpointAlignmentTime"
CHECKPOINT_START_DELAY_NANOS = "checkpointStartDelayNanos"

TASK_COUNTERS = (NUM_RECORDS_IN, NUM_RECORDS_OUT, NUM_BYTES_IN, NUM_BYTES_OUT, ACCUMULATED_BACKPRESSURED_TIME_MS)
TASK_RATES = (
    NUM_RECORDS_IN_PER_SECOND,
    NUM_RECORDS_OUT_PER_SECOND,
    NUM_BYTES_IN_PER_SECOND,
    NUM_BYTES_OUT_PER_SECOND,
    BACKPRESSURED_TIME_MS_PER_SECOND,
)
TASK_METRICS = (
    TASK_COUNTERS
    + TASK_RATES
    + (
        IS_BACKPRESSURED,
        CURRENT_INPUT_WATERMARK,
        CURRENT_OUTPUT_WATERMARK,
        LAST_CHECKPOINT_DURATION,
        LAST_CHECKPOINT_SIZE,
        CHECKPOINT_ALIGNMENT_TIME,
        CHECKPOINT_START_DELAY_NANOS,
    )
)

# --- process scope (master and TaskExecutors)
CPU_LOAD = "Status.Python.CPU.Load"  # share of the machine's CPUs used, 0..1
CPU_TIME = "Status.Python.CPU.Time"  # CPU time used by the process, ns
MEMORY_RSS = "Status.Python.Memory.RSS"  # resident set size, bytes
MEMORY_VMS = "Status.Python.Memory.VMS"  # virtual memory size, bytes
MEMORY_ARROW = "Status.Python.Memory.Arrow.Allocated"  # bytes held by Arrow's memory pool
THREADS = "Status.Python.Threads.Count"
FILE_DESCRIPTORS = "Status.Python.FileDescriptors.Count"
GC_COUNT = "Status.Python.GarbageCollector.Gen{}.Count"  # generations 0, 1, 2
UPTIME = "Status.Python.Uptime"  # ms since the process started
CPU_CORES = "Status.Python.CPU.Cores"  # CPUs this process may run on
# --- TaskExecutor scope
SHUFFLE_USED_MEMORY = "Status.Shuffle.Arrow.UsedMemory"  # bytes buffered in result partitions and input channels
NUM_SLOTS = "Status.Slots.Total"
NUM_FREE_SLOTS = "Status.Slots.Free"
NUM_RUNNING_TASKS = "Status.Tasks.Running"
# --- master (jobmanager) scope
NUM_REGISTERED_TASK_MANAGERS = "numRegisteredTaskManagers"
TASK_SLOTS_TOTAL = "taskSlotsTotal"
TASK_SLOTS_AVAILABLE = "taskSlotsAvailable"
NUM_RUNNING_JOBS = "numRunningJobs"
# --- job scope (on the master)
UPTIME_JOB = "uptime"
NUM_RESTARTS = "numRestarts"
LAST_CHECKPOINT_DURATION_JOB = "lastCheckpointDuration"
LAST_CHECKPOINT_SIZE_JOB = "lastCheckpointSize"
NUM_COMPLETED_CHECKPOINTS = "numberOfCompletedCheckpoints"
NUM_FAILED_CHECKPOINTS = "numberOfFailedCheckpoints"
NUM_IN_PROGRESS_CHECKPOINTS = "numberOfInProgressCheckpoints"
