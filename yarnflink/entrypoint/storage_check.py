"""The master's storage, checked before it starts: the HA storageDir (with HA), the checkpoint and
the savepoint directories. A file system that cannot be reached (no Hadoop client for hdfs://, a
refused connection, no permission) is a ``StorageCheckError`` naming the key and the path, rather
than a bare ``OSError`` from deep in a component (on YARN: a dead ApplicationMaster)."""

from __future__ import annotations

from yarnflink.checkpoint.options import CheckpointingOptions
from yarnflink.checkpoint.storage import CheckpointStorageError, filesystem_for
from yarnflink.common.config import ConfigOption, Configuration
from yarnflink.highavailability import ha_enabled
from yarnflink.highavailability.options import HighAvailabilityOptions

__all__ = ["StorageCheckError", "check_master_storage"]


class StorageCheckError(Exception):
    def __init__(self, key: str, url: str, problem: str) -> None:
        super().__init__(f"{key} {url} cannot be used: {problem}")
        self.key = key
        self.url = url


def _storage_keys(config: Configuration) -> list[ConfigOption]:
    keys = [CheckpointingOptions.CHECKPOINTS_DIRECTORY, CheckpointingOptions.SAVEPOINT_DIRECTORY]
    return ([HighAvailabilityOptions.HA_STORAGE_PATH] if ha_enabled(config) else []) + keys


def check_master_storage(config: Configuration) -> None:
    """Opens each configured storage's file system and looks the path up (it need not exist yet)."""
    for option in _storage_keys(config):
        url = config.get(option)
        if not url:
            continue
        url = str(url)
        try:
            fs, path = filesystem_for(url)
            fs.exists(path)
        except CheckpointStorageError as e:
            raise StorageCheckError(option.key, url, e.problem) from None
        except Exception as e:  # noqa: BLE001 - every file system error becomes one clear error
            raise StorageCheckError(option.key, url, f"{type(e).__name__}: {e}") from None
