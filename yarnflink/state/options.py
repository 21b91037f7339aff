"""Options of the keyed state backend (Flink's ``StateBackendOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["StateBackendOptions"]


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
