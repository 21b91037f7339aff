"""PyFlink's ``env.get_checkpoint_config()``, state backends and checkpoint storages, as the
configuration keys yarnflink reads (``execution.checkpointing.*``, ``state.backend.type``)."""

from __future__ import annotations

from typing import Any

from yarnflink.api.common import UnsupportedFeatureError
from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.common.config import Configuration


def _millis(value: Any, what: str, minimum: int = 0) -> str:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what}: expected milliseconds >= {minimum}, got {value!r}")
    return f"{value} ms"


def _mode_name(mode: Any) -> str:
    return str(getattr(mode, "name", mode))


class HashMapStateBackend:
    """Keyed state on the heap (``state.backend.type: hashmap``), yarnflink's backend."""

    config_value = "hashmap"


class EmbeddedRocksDBStateBackend:
    """Keyed state in an embedded RocksDB on the TaskExecutor's local disk (``state.backend.type:
    rocksdb``), for state larger than memory. ``enable_incremental_checkpointing`` must be
    None or False: its checkpoints are full (docs/STATE_AND_EVENT_TIME.md)."""

    config_value = "rocksdb"

    def __init__(self, enable_incremental_checkpointing: bool | None = None):
        if enable_incremental_checkpointing:
            raise UnsupportedFeatureError(
                "EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)",
                "the rocksdb backend's checkpoints are full snapshots",
                "EmbeddedRocksDBStateBackend() (full, canonical checkpoints; see docs/STATE_AND_EVENT_TIME.md)",
            )


class FileSystemCheckpointStorage:
    """Checkpoints under ``checkpoint_path`` (``execution.checkpointing.dir``: file://, s3://, hdfs://)."""

    def __init__(
        self, checkpoint_path: str, file_state_size_threshold: int | None = None, write_buffer_size: Any = None
    ):
        if not isinstance(checkpoint_path, str) or not checkpoint_path.strip():
            raise TypeError(f"FileSystemCheckpointStorage needs a checkpoint directory URL, got {checkpoint_path!r}")
        self.checkpoint_path = checkpoint_path


class JobManagerCheckpointStorage:
    """Refused: yarnflink writes checkpoints to a file system."""

    def __init__(self, *args: Any, **kwargs: Any):
        raise UnsupportedFeatureError(
            "JobManagerCheckpointStorage()",
            "checkpoints are always written to a file system",
            "FileSystemCheckpointStorage('file:///path') or the execution.checkpointing.dir key",
        )


class CheckpointConfig:
    """``env.get_checkpoint_config()``: every setter writes the environment's configuration."""

    def __init__(self, config: Configuration):
        self._config = config

    def set_checkpoint_interval(self, checkpoint_interval: int) -> CheckpointConfig:
        self._config.set(CheckpointingOptions.INTERVAL, _millis(checkpoint_interval, "set_checkpoint_interval()", 1))
        return self

    def get_checkpoint_interval(self) -> int:
        value = self._config.get(CheckpointingOptions.INTERVAL)
        return -1 if value is None else int(value.total_seconds() * 1000)

    def is_checkpointing_enabled(self) -> bool:
        return self._config.get(CheckpointingOptions.INTERVAL) is not None

    def set_checkpoint_timeout(self, checkpoint_timeout: int) -> CheckpointConfig:
        self._config.set(CheckpointingOptions.TIMEOUT, _millis(checkpoint_timeout, "set_checkpoint_timeout()", 1))
        return self

    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: int) -> CheckpointConfig:
        pause = _millis(min_pause_between_checkpoints, "set_min_pause_between_checkpoints()")
        self._config.set(CheckpointingOptions.MIN_PAUSE_BETWEEN_CHECKPOINTS, pause)
        return self

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> CheckpointConfig:
        self._config.set(CheckpointingOptions.MAX_CONCURRENT_CHECKPOINTS, max_concurrent_checkpoints)
        return self

    def set_checkpointing_mode(self, checkpointing_mode: Any) -> CheckpointConfig:
        self._config.set(CheckpointingOptions.CHECKPOINTING_MODE, _mode_name(checkpointing_mode))
        return self

    set_checkpointing_consistency_mode = set_checkpointing_mode

    def enable_unaligned_checkpoints(self, enabled: bool = True) -> CheckpointConfig:
        self._config.set(CheckpointingOptions.ENABLE_UNALIGNED, bool(enabled))
        return self

    def disable_unaligned_checkpoints(self) -> CheckpointConfig:
        return self.enable_unaligned_checkpoints(False)

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> CheckpointConfig:
        self._config.set(CheckpointingOptions.TOLERABLE_FAILURE_NUMBER, tolerable_checkpoint_failure_number)
        return self

    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> CheckpointConfig:
        return self.set_checkpoint_storage(FileSystemCheckpointStorage(checkpoint_path))

    def set_checkpoint_storage(self, storage: FileSystemCheckpointStorage) -> CheckpointConfig:
        if not isinstance(storage, FileSystemCheckpointStorage):
            raise TypeError(f"set_checkpoint_storage() needs a FileSystemCheckpointStorage, got {storage!r}")
        self._config.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, storage.checkpoint_path)
        return self


def state_backend_value(backend: Any) -> str:
    if not isinstance(backend, (HashMapStateBackend, EmbeddedRocksDBStateBackend)):
        raise TypeError(
            f"set_state_backend() needs a HashMapStateBackend or an EmbeddedRocksDBStateBackend, got {backend!r}"
        )
    return backend.config_value


__all__ = [
    "CheckpointConfig",
    "EmbeddedRocksDBStateBackend",
    "FileSystemCheckpointStorage",
    "HashMapStateBackend",
    "JobManagerCheckpointStorage",
    "state_backend_value",
]
