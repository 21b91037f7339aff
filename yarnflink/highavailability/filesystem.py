"""HA data in ``high-availability.storageDir`` through fsspec (local paths, ``file://``, ``s3://``,
``hdfs://``, ``memory://`` in tests).

* ``FileSystemStateStorage`` writes blobs (a JobGraph's JSON) under a fresh name and returns the
  pointer that ZooKeeper keeps (Flink's ``FileSystemStateStorageHelper``). A blob is complete
  before its pointer exists, so no reader ever follows a pointer to half a file.
* ``FileSystemJobResultStore`` is Flink's: ``<job id>_DIRTY.json`` while the job's cleanup is
  pending, ``<job id>.json`` once it is clean (or nothing, with ``job-result-store.delete-on-commit``).

On a local filesystem a write is a temporary file, fsync and rename; object stores put atomically.
"""

from __future__ import annotations

import json
import os
import posixpath
import uuid
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from yarnflink.highavailability.errors import HaStoreError
from yarnflink.highavailability.stores import JobResult, JobResultStore

__all__ = ["FileSystemJobResultStore", "FileSystemStateStorage"]

DIRTY_SUFFIX = "_DIRTY.json"
CLEAN_SUFFIX = ".json"


def _fs(url: str) -> tuple[Any, str]:
    fs, path = fsspec.core.url_to_fs(url)
    return fs, path.rstrip("/") or "/"


def _write(fs: Any, path: str, data: bytes) -> None:
    if isinstance(fs, LocalFileSystem):
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        _fsync_dir(directory)
    else:
        fs.makedirs(posixpath.dirname(path), exist_ok=True)
        fs.pipe_file(path, data)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class FileSystemStateStorage:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.fs, self.base = _fs(base_url)

    def store(self, prefix: str, data: bytes) -> str:
        """Writes ``data`` as ``<base>/<prefix><random>``; returns its pointer (a full URL)."""
        path = posixpath.join(self.base, f"{prefix}{uuid.uuid4().hex}")
        try:
            _write(self.fs, path, data)
        except OSError as e:
            raise HaStoreError(f"cannot write {path} in the HA storage directory {self.base_url}: {e}") from e
        return str(self.fs.unstrip_protocol(path))

    def retrieve(self, pointer: str) -> bytes:
        fs, path = _fs(pointer)
        try:
            with fs.open(path, "rb") as f:
                return bytes(f.read())
        except (OSError, FileNotFoundError) as e:
            raise HaStoreError(f"cannot read {pointer} from the HA storage directory: {e}") from e

    def discard(self, pointer: str) -> None:
        fs, path = _fs(pointer)
        try:
            fs.rm_file(path)
        except FileNotFoundError:
            pass


class FileSystemJobResultStore(JobResultStore):
    def __init__(self, storage_path: str, delete_on_commit: bool = True) -> None:
        self.storage_path = storage_path
        self.delete_on_commit = delete_on_commit
        self.fs, self.base = _fs(storage_path)
        self.fs.makedirs(self.base, exist_ok=True)

    def _dirty(self, job_id: str) -> str:
        return posixpath.join(self.base, f"{_safe(job_id)}{DIRTY_SUFFIX}")

    def _clean(self, job_id: str) -> str:
        return posixpath.join(self.base, f"{_safe(job_id)}{CLEAN_SUFFIX}")

    def create_dirty_result(self, result: JobResult) -> None:
        if self.has_job_result_entry(result.job_id):
            raise HaStoreError(f"the job result store already has an entry for job {result.job_id}")
        _write(self.fs, self._dirty(result.job_id), json.dumps(result.to_json()).encode())

    def mark_result_as_clean(self, job_id: str) -> None:
        if self.has_clean_job_result_entry(job_id):
            return
        dirty = self._dirty(job_id)
        if not self.fs.exists(dirty):
            if self.delete_on_commit:
                return  # cleaned and deleted before, or never dirty: nothing left to mark
            raise HaStoreError(f"no dirty job result entry for job {job_id}")
        if self.delete_on_commit:
            self.fs.rm_file(dirty)
        elif isinstance(self.fs, LocalFileSystem):
            os.replace(dirty, self._clean(job_id))
            _fsync_dir(self.base)
        else:
            self.fs.mv(dirty, self._clean(job_id))

    def has_dirty_job_result_entry(self, job_id: str) -> bool:
        return bool(self.fs.exists(self._dirty(job_id)))

    def has_clean_job_result_entry(self, job_id: str) -> bool:
        return bool(self.fs.exists(self._clean(job_id)))

    def get_dirty_results(self) -> list[JobResult]:
        try:
            names = [posixpath.basename(p) for p in self.fs.ls(self.base, detail=False)]
        except FileNotFoundError:
            return []
        out = []
        for name in sorted(names):
            if not name.endswith(DIRTY_SUFFIX):
                continue
            path = posixpath.join(self.base, name)
            try:
                with self.fs.open(path, "rb") as f:
                    out.append(JobResult.from_json(json.loads(f.read().decode())))
            except FileNotFoundError:
                continue  # marked clean meanwhile
            except (ValueError, UnicodeDecodeError) as e:
                raise HaStoreError(f"corrupt job result entry {path}: {e}") from None
        return out


def _safe(job_id: str) -> str:
    if not job_id or "/" in job_id or job_id.startswith("."):
        raise ValueError(f"invalid job id {job_id!r}")
    return job_id
