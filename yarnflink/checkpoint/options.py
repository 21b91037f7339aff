"""Options of checkpoints, savepoints and their storage (Flink's ``CheckpointingOptions``,
``SavepointConfigOptions`` and the S3 file system's keys).
"""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["CheckpointingOptions", "SavepointConfigOptions", "S3Options"]


class CheckpointingOptions:
    """When checkpoints are taken, how many are kept and where they are written."""

    INTERVAL = ConfigOption(
        "execution.checkpointing.interval",
        "duration",
        None,
        "Interval between periodic checkpoints; unset disables checkpointing.",
    )
    TIMEOUT = ConfigOption(
        "execution.checkpointing.timeout",
        "duration",
        "10 min",
        "A checkpoint not completed within this time is aborted (counts as a failed checkpoint).",
    )
    MIN_PAUSE_BETWEEN_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.min-pause",
        "duration",
        "0 ms",
        "Minimal time between the end of one checkpoint and the start of the next.",
    )
    MAX_CONCURRENT_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.max-concurrent-checkpoints",
        "int",
        1,
        "Largest number of checkpoints in progress at the same time.",
        min_value=1,
    )
    CHECKPOINTING_MODE = ConfigOption(
        "execution.checkpointing.mode",
        "enum",
        "EXACTLY_ONCE",
        "EXACTLY_ONCE (aligned barriers) or AT_LEAST_ONCE (barriers are not aligned).",
        choices=("EXACTLY_ONCE", "AT_LEAST_ONCE"),
    )
    ENABLE_UNALIGNED = ConfigOption(
        "execution.checkpointing.unaligned.enabled",
        "bool",
        False,
        "EXACTLY_ONCE only: a task snapshots on the first barrier of a checkpoint and blocks no input "
        "channel; records still in flight on the other channels are persisted with the checkpoint and "
        "replayed on restore (unaligned checkpoints). Such a checkpoint cannot be rescaled.",
    )
    TOLERABLE_FAILURE_NUMBER = ConfigOption(
        "execution.checkpointing.tolerable-failed-checkpoints",
        "int",
        0,
        "Consecutive checkpoint failures tolerated before the job fails.",
        min_value=0,
    )
    MAX_RETAINED_CHECKPOINTS = ConfigOption(
        "execution.checkpointing.num-retained",
        "int",
        1,
        "Number of completed checkpoints kept; older ones are deleted.",
        min_value=1,
    )
    EXTERNALIZED_CHECKPOINT_RETENTION = ConfigOption(
        "execution.checkpointing.externalized-checkpoint-retention",
        "enum",
        "NO_EXTERNALIZED_CHECKPOINTS",
        "What happens to completed checkpoints when the job ends: NO_EXTERNALIZED_CHECKPOINTS (deleted), "
        "DELETE_ON_CANCELLATION (kept if the job fails), RETAIN_ON_CANCELLATION (kept if cancelled or failed).",
        choices=("NO_EXTERNALIZED_CHECKPOINTS", "DELETE_ON_CANCELLATION", "RETAIN_ON_CANCELLATION"),
    )
    CHECKPOINTS_DIRECTORY = ConfigOption(
        "execution.checkpointing.dir",
        "str",
        None,
        "Checkpoint directory: file://, s3:// (s3fs) or hdfs:// (pyarrow); checkpoints go to <dir>/<job-id>/chk-<n>.",
    )
    SAVEPOINT_DIRECTORY = ConfigOption(
        "execution.checkpointing.savepoint-dir",
        "str",
        None,
        "Default directory of savepoints.",
    )
    FS_SMALL_FILE_THRESHOLD = ConfigOption(
        "execution.checkpointing.data-inline-threshold",
        "memory",
        "20 kb",
        "State smaller than this is stored inline in the checkpoint's _metadata instead of its own file.",
    )
    TESTING_KILL_MASTER_AFTER_METADATA = ConfigOption(
        "execution.checkpointing.testing.kill-master-after-metadata",
        "str",
        None,
        "Test only (the HA drills): a file path. When the JobMaster has written a checkpoint's _metadata "
        "and this file exists, it deletes the file, writes the checkpoint id to <path>.fired and SIGKILLs "
        "its master process: before the pointer is in the HA store.",
    )
    TESTING_KILL_MASTER_AFTER_POINTER = ConfigOption(
        "execution.checkpointing.testing.kill-master-after-pointer",
        "str",
        None,
        "Test only (the HA drills): as kill-master-after-metadata, once the checkpoint's pointer is in the "
        "HA store (the checkpoint completed) and before any task was notified of it.",
    )


class SavepointConfigOptions:
    """Restoring a job from a savepoint."""

    SAVEPOINT_PATH = ConfigOption(
        "execution.savepoint.path",
        "str",
        None,
        "Savepoint or retained checkpoint to restore the job from.",
    )
    SAVEPOINT_IGNORE_UNCLAIMED_STATE = ConfigOption(
        "execution.savepoint.ignore-unclaimed-state",
        "bool",
        False,
        "Allow restoring a savepoint that has state of operators the job no longer contains.",
    )


class S3Options:
    """Credentials and addressing of s3:// checkpoint and savepoint paths."""

    ENDPOINT = ConfigOption(
        "s3.endpoint",
        "str",
        None,
        "S3 endpoint URL for s3:// paths (e.g. a MinIO or test server).",
    )
    ACCESS_KEY = ConfigOption(
        "s3.access-key",
        "str",
        None,
        "S3 access key for s3:// paths.",
    )
    SECRET_KEY = ConfigOption(
        "s3.secret-key",
        "str",
        None,
        "S3 secret key for s3:// paths.",
    )
    PATH_STYLE_ACCESS = ConfigOption(
        "s3.path.style.access",
        "bool",
        False,
        "Address buckets by path (https://endpoint/bucket) instead of by virtual host.",
    )
