"""Options of the keyed state backend (Flink's ``StateBackendOptions``)."""

from __future__ import annotations

from yarnflink.common.config import ConfigOption

__all__ = ["IncrementalCheckpointOptions", "RocksDBOptions", "StateBackendOptions"]


class StateBackendOptions:
    """Which backend keeps keyed state and how its snapshots are written."""

    STATE_BACKEND = ConfigOption(
        "state.backend.type",
        "enum",
        "hashmap",
        "Keyed state backend: hashmap (state on the heap, organised by key group) or rocksdb (state in an "
        "embedded RocksDB on the TaskExecutor's local disk, for state larger than memory).",
        choices=("hashmap", "rocksdb"),
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


class RocksDBOptions:
    """The ``rocksdb`` backend's directory and memory (Flink's ``RocksDBOptions`` and
    ``RocksDBConfigurableOptions``, the keys that fit)."""

    LOCAL_DIRECTORIES = ConfigOption(
        "state.backend.rocksdb.localdir",
        "str",
        None,
        "Directory of the TaskExecutor's local disk for the rocksdb backend's files (one directory per "
        "backend, deleted when its task ends; default: yarnflink-rocksdb in the TaskExecutor's temporary "
        "directory, TMPDIR).",
    )
    USE_MANAGED_MEMORY = ConfigOption(
        "state.backend.rocksdb.memory.managed",
        "bool",
        True,
        "All rocksdb backends of a TaskExecutor share one block cache of "
        "state.backend.rocksdb.memory.fixed-per-tm bytes, to which their memtables are charged too "
        "(their memory is bounded by it). Off: each backend has its own block cache "
        "(state.backend.rocksdb.block.cache-size) and memtables (state.backend.rocksdb.writebuffer.*).",
    )
    FIX_PER_TM_MEMORY_SIZE = ConfigOption(
        "state.backend.rocksdb.memory.fixed-per-tm",
        "memory",
        "256 mb",
        "Memory of the shared cache of the TaskExecutor's rocksdb backends (data, index and filter blocks, "
        "memtables) when state.backend.rocksdb.memory.managed is on.",
        min_value=1 << 20,
    )
    WRITE_BUFFER_RATIO = ConfigOption(
        "state.backend.rocksdb.memory.write-buffer-ratio",
        "float",
        0.5,
        "Share of the shared cache the memtables may take (managed memory).",
        min_value=0.01,
        max_value=0.99,
    )
    BLOCK_CACHE_SIZE = ConfigOption(
        "state.backend.rocksdb.block.cache-size",
        "memory",
        "8 mb",
        "A backend's own block cache when memory is not managed.",
        min_value=0,
    )
    WRITE_BUFFER_SIZE = ConfigOption(
        "state.backend.rocksdb.writebuffer.size",
        "memory",
        "64 mb",
        "A memtable's size when memory is not managed.",
        min_value=1 << 16,
    )
    MAX_WRITE_BUFFER_NUMBER = ConfigOption(
        "state.backend.rocksdb.writebuffer.count",
        "int",
        2,
        "Memtables per backend when memory is not managed.",
        min_value=1,
    )
