"""Options of the keyed state backend (Flink's ``StateBackendOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["IncrementalCheckpointOptions", "StateBackendOptions"]


class StateBackendOptions:
    """Which backend keeps keyed state and how its snapshots are written."""

    STATE_BACKEND = ConfigOption(
        "state.backend.type",
        "enum",
        "hashmap",
        "Keyed state backend: hashmap (state on the heap, organised by key group).",
        choices=("hashmap",),
    )
    SNAPSHOT_MODE = ConfigOption(
        "state.backend.hashmap.snapshot-mode",
        "enum",
        "thread",
        "yarnflink: where the asynchronous part of a hashmap snapshot serializes the state: thread (a "
        "background thread of the TaskExecutor, sharing the GIL with the task) or fork (a forked child "
        "process with a copy-on-write image of the heap; Linux only). See docs/PERFORMANCE.md.",
        choices=("thread", "fork"),
    )
    SNAPSHOT_COMPRESSION = ConfigOption(
        "execution.checkpointing.snapshot-compression",
        "bool",
        False,
        "Compress keyed state snapshots (yarnflink: LZ4 frames in the Arrow IPC files; Flink: Snappy).",
    )


class IncrementalCheckpointOptions:
    """Incremental checkpoints of keyed state (Flink's ``execution.checkpointing.incremental``)
    and when the ``hashmap`` backend writes a new materialized base (``yarnflink.state.incremental``)."""

    INCREMENTAL = ConfigOption(
        "execution.checkpointing.incremental",
        "bool",
        False,
        "Incremental checkpoints: a checkpoint writes only the keyed state changed since the last "
        "checkpoint confirmed to the task (a delta file in the job's shared/ directory), and now and then a "
        "full materialized base (see the two ...incremental.materialization options); files shared by "
        "several checkpoints are reference-counted by the JobMaster and deleted when no retained checkpoint "
        "refers to them. Savepoints are always full.",
    )
    INCREMENTAL_MAX_DELTAS = ConfigOption(
        "execution.checkpointing.incremental.materialization.max-deltas",
        "int",
        50,
        "yarnflink: an incremental checkpoint writes a new materialized base instead of a delta once its "
        "chain (base + deltas) would hold more deltas than this.",
        min_value=0,
    )
    INCREMENTAL_MAX_DELTA_RATIO = ConfigOption(
        "execution.checkpointing.incremental.materialization.max-delta-ratio",
        "float",
        0.5,
        "yarnflink: an incremental checkpoint writes a new materialized base instead of a delta once the "
        "deltas of its chain would exceed this fraction of the base's size (so a restore reads at most "
        "about (1 + ratio) x the base).",
        min_value=0,
    )
