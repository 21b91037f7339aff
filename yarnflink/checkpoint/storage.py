"""Checkpoint storage on a file system, through fsspec (``file://``, ``s3://`` with s3fs,
``hdfs://`` with pyarrow's HadoopFileSystem). The driver side of the CheckpointCoordinator and of
the state backends; the pure core never imports this module.

Layout (Flink's)::

    <execution.checkpointing.dir>/<job-id>/
        chk-<n>/_metadata          written last, atomically
        chk-<n>/<state files>      exclusive state of checkpoint n (Arrow IPC)
        shared/                    state shared between checkpoints
        taskowned/                 state owned by tasks

A state file smaller than ``execution.checkpointing.data-inline-threshold`` is not written: its
bytes go inline into ``_metadata``. ``_metadata`` is written with one atomic step: a temporary
file renamed into place on file systems that rename atomically (local, HDFS), a single PUT on
object stores (an S3 object appears whole or not at all). A ``chk-<n>`` directory without
``_metadata`` is an unfinished checkpoint and is never restored; ``find_latest_valid`` falls back
to the newest checkpoint whose metadata is intact and whose state files exist.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import functools
import hashlib
import io
import itertools
import os
import posixpath
import re
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from yarnflink.checkpoint.metadata import (
    METADATA_FILE_NAME,
    CheckpointMetadataError,
    CompletedCheckpoint,
    deserialize_metadata,
    serialize_metadata,
)
from yarnflink.checkpoint.options import S3Options
from yarnflink.common.config import Configuration
from yarnflink.state.handles import (
    CONTENT_HASH,
    ByteStreamStateHandle,
    FileStateHandle,
    KeyGroupRange,
    SharedFileHandle,
    StreamStateHandle,
)
from yarnflink.state.snapshot_serializer import BufferPieces
from yarnflink.state.streams import EXCLUSIVE, SHARED, TASKOWNED, content_hash, file_content_hash

_CHK = re.compile(r"^chk-(\d+)$")
_ATOMIC_RENAME_PROTOCOLS = {"file", "local", "hdfs", "arrow_hdfs", "memory"}
T = TypeVar("T")


class CheckpointStorageError(Exception):
    """The checkpoint storage cannot be used (unreachable endpoint, missing library, permission,
    ...); the message names the path and the problem."""

    def __init__(self, path: str, problem: str):
        super().__init__(f"checkpoint storage {path}: {problem}")
        self.path = path
        self.problem = problem


def _describe(e: BaseException) -> str:
    text = str(e) or repr(e)
    return f"{type(e).__name__}: {text}"


def _io(path: str, what: str, fn: Callable[[], T]) -> T:
    try:
        return fn()
    except (CheckpointStorageError, CheckpointMetadataError):
        raise
    except FileNotFoundError as e:
        raise CheckpointStorageError(path, f"{what} failed: not found ({e})") from e
    except Exception as e:  # noqa: BLE001 - every file system error becomes one clear error
        raise CheckpointStorageError(path, f"{what} failed: {_describe(e)}") from e


def _remove_if_exists(fs: Any, path: str) -> None:
    if fs.exists(path):
        fs.rm_file(path)


def storage_options_from_config(conf: Mapping[str, Any] | Configuration | None, url: str) -> dict[str, Any]:
    """fsspec storage options for ``url`` from Flink's keys (``s3.endpoint``, ``s3.access-key``,
    ``s3.secret-key``, ``s3.path.style.access``)."""
    conf = conf or {}
    if not url.startswith(("s3://", "s3a://")):
        return {}
    opts: dict[str, Any] = {}
    for option, name in (
        (S3Options.ENDPOINT, "endpoint_url"),
        (S3Options.ACCESS_KEY, "key"),
        (S3Options.SECRET_KEY, "secret"),
    ):
        value = option.read(conf)
        if value:
            opts[name] = str(value)
    if S3Options.PATH_STYLE_ACCESS.read(conf):
        opts["config_kwargs"] = {"s3": {"addressing_style": "path"}}
    return opts


def filesystem_for(url: str, storage_options: Mapping[str, Any] | None = None) -> tuple[Any, str]:
    """``(fsspec file system, path without protocol)`` for ``url``; CheckpointStorageError if
    the file system cannot be created (unknown scheme, missing s3fs / Hadoop client, ...)."""
    import fsspec.core  # deferred: fsspec loads on the first file system use

    if url.startswith("s3a://"):
        url = "s3://" + url[len("s3a://") :]

    def make() -> tuple[Any, str]:
        fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
        _keep_authority(fs, url, path)
        return fs, path

    try:
        return make()
    except ImportError as e:
        scheme = url.split("://", 1)[0]
        hint = {
            "s3": "install s3fs (pip install yarnflink[s3])",
            "hdfs": "pyarrow needs a Hadoop client (libhdfs, HADOOP_HOME, CLASSPATH)",
        }.get(scheme, "")
        raise CheckpointStorageError(url, f"no file system for {scheme}://: {e}{'; ' + hint if hint else ''}") from e
    except Exception as e:  # noqa: BLE001
        hint = ""
        if url.startswith("hdfs://"):
            hint = (
                "; pyarrow's HadoopFileSystem needs a Hadoop client: libhdfs (ARROW_LIBHDFS_DIR or "
                "HADOOP_HOME), JAVA_HOME and CLASSPATH=$(hadoop classpath --glob)"
            )
        raise CheckpointStorageError(url, f"cannot open the file system: {_describe(e)}{hint}") from e


def _keep_authority(fs: Any, url: str, path: str) -> None:
    """pyarrow's HadoopFileSystem drops ``host:port`` from the paths it strips (``unstrip_protocol``
    gives ``hdfs:///p``): remember the URL's authority on the file system instance (fsspec makes
    one per authority) so that the URLs we print and record keep it (``hdfs://nn:8020/p``)."""
    scheme, sep, rest = url.partition("://")
    authority = rest.split("/", 1)[0] if sep else ""
    if authority and authority not in fs.unstrip_protocol(path):
        fs._yarnflink_authority = f"{scheme}://{authority}"


def _url(fs: Any, path: str) -> str:
    authority = getattr(fs, "_yarnflink_authority", None)
    if authority:
        return authority + "/" + path.lstrip("/")
    return fs.unstrip_protocol(path)


def read_stream_handle(
    handle: StreamStateHandle | SharedFileHandle, storage_options: Mapping[str, Any] | None = None
) -> bytes:
    """The bytes of a state handle (inline, or a file read through fsspec); a shared file's content
    hash is checked (CheckpointStorageError naming the file if it does not match)."""
    if isinstance(handle, ByteStreamStateHandle):
        return handle.data
    fs, path = filesystem_for(handle.path, storage_options)
    data = _io(handle.path, "reading the state file", lambda: fs.cat_file(path))
    if len(data) != handle.size:
        raise CheckpointStorageError(
            handle.path, f"the state file has {len(data)} bytes, the checkpoint recorded {handle.size}"
        )
    if isinstance(handle, SharedFileHandle):
        got = content_hash([data])
        if got != handle.content_hash:
            raise CheckpointStorageError(
                handle.path, f"the shared state file is corrupted: its content hash is {got}, not {handle.content_hash}"
            )
    return data


#: a download's piece: what a restore holds of a file at a time
DOWNLOAD_CHUNK_BYTES = 4 << 20


def download_stream_handle(
    handle: StreamStateHandle | SharedFileHandle, dest: str, storage_options: Mapping[str, Any] | None = None
) -> None:
    """Copy a state handle's bytes into the local file ``dest`` in pieces of
    ``DOWNLOAD_CHUNK_BYTES`` (a restore never holds a whole file), checking its size and a shared
    file's content hash as ``read_stream_handle`` does (``dest`` is removed if they do not match)."""
    if isinstance(handle, ByteStreamStateHandle):
        with open(dest, "wb") as out:
            out.write(handle.data)
        return
    fs, path = filesystem_for(handle.path, storage_options)
    digest = hashlib.new(CONTENT_HASH) if isinstance(handle, SharedFileHandle) else None

    def copy() -> int:
        size = 0
        with fs.open(path, "rb", block_size=DOWNLOAD_CHUNK_BYTES) as src, open(dest, "wb") as out:
            while chunk := src.read(DOWNLOAD_CHUNK_BYTES):
                out.write(chunk)
                if digest is not None:
                    digest.update(chunk)
                size += len(chunk)
        return size

    size = _io(handle.path, "reading the state file", copy)
    problem = None
    if size != handle.size:
        problem = f"the state file has {size} bytes, the checkpoint recorded {handle.size}"
    elif isinstance(handle, SharedFileHandle) and digest is not None:
        got = f"{CONTENT_HASH}:{digest.hexdigest()}"
        if got != handle.content_hash:
            problem = f"the shared state file is corrupted: its content hash is {got}, not {handle.content_hash}"
    if problem is not None:
        os.unlink(dest)
        raise CheckpointStorageError(handle.path, problem)


class StorageReader:
    """A ``StateReader`` of checkpoint storage: called, a handle's bytes; ``copy_to``, a handle
    copied to a local file in pieces (``state.streams.download`` uses it when the reader has it).
    ``options_for(handle)`` gives the fsspec options of the handle's URL."""

    def __init__(self, options_for: Callable[[StreamStateHandle | SharedFileHandle], Mapping[str, Any] | None]):
        self._options_for = options_for

    def __call__(self, handle: StreamStateHandle | SharedFileHandle) -> bytes:
        return read_stream_handle(handle, self._options_for(handle))

    def copy_to(self, handle: StreamStateHandle | SharedFileHandle, dest: str) -> None:
        download_stream_handle(handle, dest, self._options_for(handle))


def make_reader(storage_options: Mapping[str, Any] | None = None) -> StorageReader:
    return StorageReader(lambda h: storage_options)


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "state"


class FsCheckpointStreamFactory:
    """Writes state files under a checkpoint's directories (``CheckpointStreamFactory``); ``data`` is
    ``bytes`` or any buffer (a keyed-state snapshot is a ``memoryview`` of an Arrow buffer)."""

    def __init__(
        self,
        fs: Any,
        exclusive_dir: str,
        shared_dir: str,
        taskowned_dir: str,
        inline_threshold: int,
        checkpoint_id: int = 0,
        shared_state: bool = False,
    ):
        self.fs = fs
        self.dirs = {EXCLUSIVE: exclusive_dir, SHARED: shared_dir, TASKOWNED: taskowned_dir}
        self.inline_threshold = inline_threshold
        self.checkpoint_id = checkpoint_id
        #: whether snapshots may write shared files here (a checkpoint's factory, not a savepoint's)
        self.shared_state = shared_state
        self._shared_dir_made = False

    def write_shared(self, data: Any, name: str, key_group_range: KeyGroupRange, kind: str) -> SharedFileHandle:
        """A shared state file (always a file, never inline): ``shared/chk<n>_<name>-<uuid>.arrow``
        (``n``: the checkpoint that wrote it), with its size and content hash."""
        pieces = data.buffers() if isinstance(data, BufferPieces) else [memoryview(data).cast("B")]
        size = sum(len(p) for p in pieces)
        url = self._put_shared(name, lambda path: write_file(self.fs, path, data))
        return SharedFileHandle(url, size, content_hash(pieces), key_group_range, kind)

    def _put_shared(self, name: str, put: Callable[[str], None]) -> str:
        """A new shared state file, ``shared/chk<n>_<name>-<uuid>.arrow``, written by ``put(path)``
        (the directory made first, once); its URL."""
        file_name = f"chk{self.checkpoint_id}_{_safe_name(name)}-{uuid.uuid4().hex}.arrow"
        path = posixpath.join(self.dirs[SHARED], file_name)
        url = _url(self.fs, path)

        def write() -> None:
            if not self._shared_dir_made:
                self.fs.makedirs(self.dirs[SHARED], exist_ok=True)
                self._shared_dir_made = True
            put(path)

        _io(url, "writing a shared state file", write)
        return url

    def write_state(self, data: bytes, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle:
        if len(data) < self.inline_threshold:
            return ByteStreamStateHandle(name, bytes(data))
        if scope not in self.dirs:
            raise ValueError(f"unknown state scope {scope!r}")
        path = posixpath.join(self.dirs[scope], f"{_safe_name(name)}-{uuid.uuid4().hex}.arrow")
        url = _url(self.fs, path)
        _io(url, "writing a state file", lambda: write_file(self.fs, path, data))
        return FileStateHandle(url, len(data))

    def write_state_file(self, local_path: str, name: str, scope: str = EXCLUSIVE) -> StreamStateHandle:
        """``write_state`` of the local file ``local_path`` (a spooled snapshot file), copied
        by the kernel to a local file system and uploaded from a memory map to others."""
        size = os.path.getsize(local_path)
        if size < self.inline_threshold:
            with open(local_path, "rb") as f:
                return ByteStreamStateHandle(name, f.read())
        if scope not in self.dirs:
            raise ValueError(f"unknown state scope {scope!r}")
        path = posixpath.join(self.dirs[scope], f"{_safe_name(name)}-{uuid.uuid4().hex}.arrow")
        url = _url(self.fs, path)
        _io(url, "writing a state file", lambda: upload_file(self.fs, local_path, path))
        return FileStateHandle(url, size)

    def write_shared_file(
        self, local_path: str, name: str, key_group_range: KeyGroupRange, kind: str
    ) -> SharedFileHandle:
        """``write_shared`` of the local file ``local_path`` (an SST file of a RocksDB checkpoint):
        its content hash read in pieces, then copied as ``write_state_file`` copies."""
        digest = file_content_hash(local_path)
        size = os.path.getsize(local_path)
        url = self._put_shared(name, lambda path: upload_file(self.fs, local_path, path))
        return SharedFileHandle(url, size, digest, key_group_range, kind)


def upload_file(fs: Any, local_path: str, path: str) -> None:
    """Copy the local file ``local_path`` to ``path`` on ``fs``: on a local file system by the
    kernel (``shutil.copyfile``: nothing passes through the process's memory), elsewhere from a
    memory map through ``write_file`` (its pages are the page cache's)."""
    if _protocols(fs) & {"file", "local"}:
        shutil.copyfile(local_path, path)
        return
    import pyarrow as pa  # deferred: pyarrow loads when a snapshot is written

    with pa.memory_map(local_path) as mapped:
        write_file(fs, path, mapped.read_buffer())


def _protocols(fs: Any) -> set[str]:
    return set(fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,))


def write_file(fs: Any, path: str, data: Any) -> None:
    """Write ``data`` to ``path`` without copying it while holding the GIL: ``bytes``, any
    buffer, or a keyed-state snapshot's ``BufferPieces`` (its pieces are written one after the
    other; to S3 through zero-copy file views, ``put_s3_object``)."""
    protocols = _protocols(fs)
    views = data.buffers() if isinstance(data, BufferPieces) else [memoryview(data).cast("B")]
    if "s3" in protocols:
        put_s3_object(fs, path, views)
    elif protocols & {"file", "local"}:
        with fs.open(path, "wb") as f:
            for view in views:
                f.write(view)
    else:
        fs.pipe_file(path, bytes(data))


class _BufferFile(io.RawIOBase):
    """A read-only, seekable file over the bytes ``[start, end)`` of a sequence of buffers (no
    copy of them). botocore takes a file as a request body, but not a ``memoryview``; given
    ``bytes``, s3fs slices 50 MB parts out of them and botocore copies them again, ~0.1 s per
    100 MB holding the GIL. This file is read in small pieces instead (by aiohttp, and by
    botocore for its checksum)."""

    def __init__(self, views: Sequence[memoryview], start: int = 0, end: int | None = None) -> None:
        super().__init__()
        self._views = views
        self._starts = list(itertools.accumulate((len(v) for v in views), initial=0))
        self._begin = start
        self._end = self._starts[-1] if end is None else end
        self._pos = 0

    def __len__(self) -> int:
        return self._end - self._begin

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        left = max(0, len(self) - self._pos)
        n = left if size is None or size < 0 else min(size, left)
        at = self._begin + self._pos
        stop = at + n
        chunks = []
        i = bisect.bisect_right(self._starts, at) - 1
        while at < stop:
            view = self._views[i]
            offset = at - self._starts[i]
            take = min(len(view) - offset, stop - at)
            chunks.append(view[offset : offset + take])
            at += take
            i += 1
        self._pos += n
        return b"".join(chunks)

    def readinto(self, buffer: Any) -> int:
        chunk = self.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


#: state files of at least twice this size go to S3 in parts of this size (s3fs's own choice)
S3_PART_SIZE = 50 << 20


def put_s3_object(fs: Any, path: str, views: Sequence[memoryview]) -> None:
    """Upload the bytes of ``views`` (one after the other) to ``path`` on s3fs ``fs``: one PUT
    below ``2 * S3_PART_SIZE``, else a multipart upload (parts in parallel, up to
    ``fs.max_concurrency``; aborted on failure). botocore's default checksum (CRC32 of every
    request body, checked by S3) is kept."""
    from fsspec.asyn import sync  # deferred: fsspec loads on the first file system use

    sync(fs.loop, _put_s3_object, fs, path, views)
    fs.invalidate_cache(path)


async def _put_s3_object(fs: Any, path: str, views: Sequence[memoryview]) -> None:
    bucket, key, _ = fs.split_path(path)
    size = sum(len(v) for v in views)
    if size < 2 * S3_PART_SIZE:
        await fs._call_s3("put_object", Bucket=bucket, Key=key, Body=_BufferFile(views))
        return
    upload = (await fs._call_s3("create_multipart_upload", Bucket=bucket, Key=key))["UploadId"]
    slots = asyncio.Semaphore(max(1, int(getattr(fs, "max_concurrency", 1))))

    async def part(number: int, start: int) -> dict[str, Any]:
        async with slots:
            out = await fs._call_s3(
                "upload_part",
                Bucket=bucket,
                Key=key,
                UploadId=upload,
                PartNumber=number,
                Body=_BufferFile(views, start, min(size, start + S3_PART_SIZE)),
            )
        return {"PartNumber": number, "ETag": out["ETag"]}

    try:
        parts = await asyncio.gather(*(part(i + 1, start) for i, start in enumerate(range(0, size, S3_PART_SIZE))))
        await fs._call_s3(
            "complete_multipart_upload", Bucket=bucket, Key=key, UploadId=upload, MultipartUpload={"Parts": list(parts)}
        )
    except BaseException:
        with contextlib.suppress(Exception):  # the upload's own error is the one to report
            await fs._call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload)
        raise


@dataclass
class LatestValid:
    """What ``find_latest_valid`` found: the checkpoint (None if none is usable) and why newer
    ones were skipped."""

    checkpoint: CompletedCheckpoint | None
    skipped: list[CheckpointMetadataError] = field(default_factory=list)


class FsCheckpointStorage:
    """The checkpoints of one job under ``<checkpoint_dir>/<job_id>``."""

    def __init__(
        self,
        checkpoint_dir: str,
        job_id: str,
        *,
        storage_options: Mapping[str, Any] | None = None,
        inline_threshold: int = 20 * 1024,
    ):
        if not checkpoint_dir:
            raise CheckpointStorageError("<unset>", "execution.checkpointing.dir is not set")
        self.checkpoint_dir = checkpoint_dir.rstrip("/")
        self.job_id = job_id
        self.storage_options = dict(storage_options or {})
        self.inline_threshold = inline_threshold
        self.fs, base = filesystem_for(self.checkpoint_dir, self.storage_options)
        self.job_path = posixpath.join(base.rstrip("/"), job_id)
        self.shared_path = posixpath.join(self.job_path, "shared")
        self.taskowned_path = posixpath.join(self.job_path, "taskowned")

    # ------------------------------------------------------------------ locations
    @property
    def job_url(self) -> str:
        return _url(self.fs, self.job_path)

    @property
    def shared_url(self) -> str:
        return _url(self.fs, self.shared_path)

    def checkpoint_path(self, checkpoint_id: int) -> str:
        return posixpath.join(self.job_path, f"chk-{checkpoint_id}")

    def checkpoint_url(self, checkpoint_id: int) -> str:
        return _url(self.fs, self.checkpoint_path(checkpoint_id))

    def initialize(self) -> None:
        """Create the job's directories; fails fast with a clear error if the storage is
        unreachable."""
        for p in (self.job_path, self.shared_path, self.taskowned_path):
            _io(
                _url(self.fs, p),
                "creating the checkpoint directory",
                functools.partial(self.fs.makedirs, p, exist_ok=True),
            )

    def connect(self) -> None:
        """Create the file system's client now (s3fs: the botocore client, whose service model
        takes ~0.2 s of CPU holding the GIL to load), so that the first checkpoint does not do
        it on its snapshot thread while the task runs. No request is sent."""
        connect = getattr(self.fs, "connect", None)
        if callable(connect) and "s3" in _protocols(self.fs):
            _io(self.job_url, "creating the S3 client", connect)

    def stream_factory(self, checkpoint_id: int) -> FsCheckpointStreamFactory:
        chk = self.checkpoint_path(checkpoint_id)
        _io(_url(self.fs, chk), "creating the checkpoint directory", lambda: self.fs.makedirs(chk, exist_ok=True))
        return FsCheckpointStreamFactory(
            self.fs, chk, self.shared_path, self.taskowned_path, self.inline_threshold, checkpoint_id, shared_state=True
        )

    def savepoint_stream_factory(self, savepoint_url: str) -> FsCheckpointStreamFactory:
        fs, path = filesystem_for(savepoint_url, self.storage_options)
        _io(savepoint_url, "creating the savepoint directory", lambda: fs.makedirs(path, exist_ok=True))
        return FsCheckpointStreamFactory(fs, path, path, path, self.inline_threshold)

    # ------------------------------------------------------------------ metadata
    def write_metadata(self, checkpoint: CompletedCheckpoint, target_directory: str | None = None) -> str:
        """Write ``_metadata`` atomically (last step of a checkpoint); returns the directory URL
        (the checkpoint's external pointer)."""
        if target_directory is not None:
            fs, directory = filesystem_for(target_directory, self.storage_options)
        else:
            fs, directory = self.fs, self.checkpoint_path(checkpoint.checkpoint_id)
        data = serialize_metadata(checkpoint, relative_to=_url(fs, directory) if checkpoint.is_savepoint else None)
        _write_metadata_file(fs, directory, data)
        return _url(fs, directory)

    def read_metadata(self, location: str) -> CompletedCheckpoint:
        """The checkpoint at ``location`` (a ``chk-<n>`` / savepoint directory URL, or its
        ``_metadata`` file); CheckpointMetadataError if missing or corrupted."""
        return read_checkpoint(location, self.storage_options)

    def checkpoint_ids(self) -> list[int]:
        """Ids of the ``chk-<n>`` directories (complete or not), ascending."""

        def ls() -> list[str]:
            self.fs.invalidate_cache(self.job_path)  # other processes may have written since
            try:
                return self.fs.ls(self.job_path, detail=False)
            except FileNotFoundError:
                return []

        names = _io(self.job_url, "listing checkpoints", ls)
        ids = []
        for name in names:
            m = _CHK.match(posixpath.basename(name.rstrip("/")))
            if m:
                ids.append(int(m.group(1)))
        return sorted(ids)

    def shared_files(self) -> list[str]:
        """URLs of the files in the job's ``shared/`` directory."""

        def ls() -> list[str]:
            self.fs.invalidate_cache(self.shared_path)
            try:
                return [p for p in self.fs.ls(self.shared_path, detail=False)]
            except FileNotFoundError:
                return []

        return [_url(self.fs, p) for p in _io(self.shared_url, "listing shared state", ls)]

    def validate(self, checkpoint: CompletedCheckpoint) -> None:
        """CheckpointMetadataError if a state file the checkpoint refers to is missing or has
        another size than recorded."""
        validate_checkpoint(checkpoint, self.storage_options)

    def find_latest_valid(self) -> LatestValid:
        """The newest checkpoint that can be restored, skipping (and reporting) newer ones whose
        ``_metadata`` is missing or corrupted or whose state files are missing."""
        skipped: list[CheckpointMetadataError] = []
        for cid in reversed(self.checkpoint_ids()):
            try:
                c = self.read_metadata(self.checkpoint_url(cid))
                if c.checkpoint_id != cid:
                    raise CheckpointMetadataError(
                        self.checkpoint_url(cid), f"it describes checkpoint {c.checkpoint_id}, not {cid}"
                    )
                if c.job_id != self.job_id:
                    raise CheckpointMetadataError(
                        self.checkpoint_url(cid), f"it belongs to job {c.job_id}, not {self.job_id}"
                    )
                self.validate(c)
                return LatestValid(c, skipped)
            except CheckpointMetadataError as e:
                skipped.append(e)
        return LatestValid(None, skipped)

    # ------------------------------------------------------------------ deletion
    def discard_checkpoint(
        self, checkpoint: CompletedCheckpoint, shared: list[StreamStateHandle] | None = None
    ) -> None:
        """Delete a completed checkpoint: its state files outside its directory, then the
        directory (``_metadata`` first, so a crash midway never leaves a restorable half), then
        ``shared``: the shared files no retained checkpoint refers to any more (its own shared
        files are not touched otherwise: the SharedStateRegistry decides)."""
        pointer = checkpoint.external_pointer or self.checkpoint_url(checkpoint.checkpoint_id)
        _discard_completed(checkpoint, pointer, self.storage_options)
        if shared:
            self.discard_state(shared)

    def discard_state(self, handles: list[StreamStateHandle]) -> None:
        for h in handles:
            if isinstance(h, FileStateHandle):
                fs, path = filesystem_for(h.path, self.storage_options)
                _io(h.path, "deleting a state file", functools.partial(_remove_if_exists, fs, path))

    def discard_unfinished(self) -> list[str]:
        """Once the job has ended for good: delete what checkpoints in flight left (a ``chk-<n>``
        without ``_metadata``, empty or with state files; an ``._metadata.inprogress-*`` beside a
        written one). Completed checkpoints stay. Returns the URLs deleted."""
        deleted: list[str] = []
        for cid in self.checkpoint_ids():
            chk = self.checkpoint_path(cid)

            def ls(chk: str = chk) -> list[str]:
                self.fs.invalidate_cache(chk)
                return [posixpath.basename(n.rstrip("/")) for n in self.fs.ls(chk, detail=False)]

            names = _io(self.checkpoint_url(cid), "listing the checkpoint directory", ls)
            if METADATA_FILE_NAME not in names:
                self.discard_incomplete(cid)
                deleted.append(self.checkpoint_url(cid))
                continue
            for name in names:
                if name.startswith(f".{METADATA_FILE_NAME}.inprogress-"):
                    path = posixpath.join(chk, name)
                    _io(
                        _url(self.fs, path), "deleting an unfinished metadata file", functools.partial(self.fs.rm, path)
                    )
                    deleted.append(_url(self.fs, path))
        return deleted

    def discard_incomplete(self, checkpoint_id: int) -> None:
        """Delete the directory of a checkpoint that never completed."""
        path = self.checkpoint_path(checkpoint_id)
        _io(
            self.checkpoint_url(checkpoint_id),
            "deleting the checkpoint directory",
            lambda: self.fs.rm(path, recursive=True) if self.fs.exists(path) else None,
        )


# ----------------------------------------------------------------------------- module functions
def _write_metadata_file(fs: Any, directory: str, data: bytes) -> None:
    final = posixpath.join(directory, METADATA_FILE_NAME)

    def write() -> None:
        fs.makedirs(directory, exist_ok=True)
        if _ATOMIC_RENAME_PROTOCOLS & _protocols(fs):
            tmp = posixpath.join(directory, f".{METADATA_FILE_NAME}.inprogress-{uuid.uuid4().hex}")
            fs.pipe_file(tmp, data)
            fs.mv(tmp, final)
        else:
            fs.pipe_file(final, data)  # one PUT: visible whole or not at all

    _io(_url(fs, final), "writing the checkpoint metadata", write)


def read_checkpoint(location: str, storage_options: Mapping[str, Any] | None = None) -> CompletedCheckpoint:
    """The checkpoint or savepoint at ``location`` (its directory or its ``_metadata``), relative
    state file paths resolved against where it is now; CheckpointMetadataError if the metadata
    is missing or corrupted, CheckpointStorageError if the storage cannot be read."""
    fs, path = filesystem_for(location, storage_options)
    if posixpath.basename(path.rstrip("/")) != METADATA_FILE_NAME:
        path = posixpath.join(path.rstrip("/"), METADATA_FILE_NAME)
    url = _url(fs, path)
    try:
        fs.invalidate_cache(posixpath.dirname(path))
        data = fs.cat_file(path)
    except FileNotFoundError:
        raise CheckpointMetadataError(
            url, "the file does not exist (the checkpoint was not completed, or was deleted)"
        ) from None
    except IsADirectoryError:
        raise CheckpointMetadataError(url, "it is a directory, not a metadata file") from None
    except Exception as e:  # noqa: BLE001
        raise CheckpointStorageError(url, f"reading the checkpoint metadata failed: {_describe(e)}") from e
    checkpoint = deserialize_metadata(data, url, _url(fs, posixpath.dirname(path)))
    checkpoint.external_pointer = _url(fs, posixpath.dirname(path))
    return checkpoint


def _discard_completed(
    checkpoint: CompletedCheckpoint, pointer: str, storage_options: Mapping[str, Any] | None
) -> None:
    fs, directory = filesystem_for(pointer, storage_options)
    meta = posixpath.join(directory, METADATA_FILE_NAME)

    def rm() -> None:
        if fs.exists(meta):
            fs.rm_file(meta)
        for h in checkpoint.stream_handles():
            if isinstance(h, FileStateHandle):
                hfs, hpath = filesystem_for(h.path, storage_options)
                if not hpath.startswith(directory.rstrip("/") + "/") and hfs.exists(hpath):
                    hfs.rm_file(hpath)
        if fs.exists(directory):
            fs.rm(directory, recursive=True)

    _io(pointer, "deleting the checkpoint", rm)


def discard_checkpoint_at(
    pointer: str, storage_options: Mapping[str, Any] | None = None, with_shared: bool = False
) -> None:
    """Delete the completed checkpoint whose ``_metadata`` (or directory) ``pointer`` names, as
    ``FsCheckpointStorage.discard_checkpoint``; if its metadata cannot be read, its directory.
    ``with_shared``: its shared files too (every checkpoint of the job goes: its HA cleanup)."""
    location = pointer.rstrip("/")
    if posixpath.basename(location) == METADATA_FILE_NAME:
        location = location[: -len(METADATA_FILE_NAME) - 1]
    try:
        checkpoint = read_checkpoint(location, storage_options)
    except CheckpointMetadataError:
        checkpoint = CompletedCheckpoint("", 0, 0)
    _discard_completed(checkpoint, location, storage_options)
    if with_shared:
        for h in checkpoint.shared_handles():
            fs, path = filesystem_for(h.path, storage_options)
            _io(h.path, "deleting a shared state file", functools.partial(_remove_if_exists, fs, path))


def validate_checkpoint(
    checkpoint: CompletedCheckpoint, storage_options: Mapping[str, Any] | None = None, verify_content: bool = True
) -> None:
    """CheckpointMetadataError naming the checkpoint and the file if a state file it refers to is
    missing or does not have the size recorded (truncated, replaced), or, ``verify_content``, if
    a shared file's content hash does not match (corrupted)."""
    where = checkpoint.external_pointer or f"checkpoint {checkpoint.checkpoint_id}"
    for shared in checkpoint.shared_handles():
        validate_checkpoint_file(where, shared.as_file(), storage_options, "shared state file")
        if verify_content:
            try:
                read_stream_handle(shared, storage_options)
            except CheckpointStorageError as e:
                raise CheckpointMetadataError(where, f"shared state file {shared.path}: {e.problem}") from None
    for h in checkpoint.stream_handles():
        if not isinstance(h, FileStateHandle):
            continue
        fs, path = filesystem_for(h.path, storage_options)

        def size(fs: Any = fs, path: str = path) -> int | None:
            try:
                return int(fs.info(path).get("size") or 0)
            except FileNotFoundError:
                return None

        got = _io(h.path, "checking a state file", size)
        if got is None:
            raise CheckpointMetadataError(where, f"state file {h.path} is missing")
        if got != h.size:
            raise CheckpointMetadataError(where, f"state file {h.path} has {got} bytes, the metadata recorded {h.size}")


def validate_checkpoint_file(
    where: str, h: FileStateHandle, storage_options: Mapping[str, Any] | None, what: str = "state file"
) -> None:
    fs, path = filesystem_for(h.path, storage_options)

    def size() -> int | None:
        try:
            return int(fs.info(path).get("size") or 0)
        except FileNotFoundError:
            return None

    got = _io(h.path, f"checking a {what}", size)
    if got is None:
        raise CheckpointMetadataError(where, f"{what} {h.path} is missing")
    if got != h.size:
        raise CheckpointMetadataError(where, f"{what} {h.path} has {got} bytes, the metadata recorded {h.size}")


def write_savepoint(
    checkpoint: CompletedCheckpoint, target: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[str, CompletedCheckpoint]:
    """Make a savepoint self-contained at ``target``: every state file it refers to that lies
    elsewhere (tasks wrote them under the job's checkpoint directory) is copied into ``target``,
    then ``_metadata`` is written last, with paths relative to ``target``. Returns the target
    URL and the savepoint as stored (absolute paths under ``target``). The copied originals are
    the caller's to delete."""
    fs, directory = filesystem_for(target, storage_options)
    directory = directory.rstrip("/")
    target_url = _url(fs, directory)
    prefix = target_url + "/"
    _io(target_url, "creating the savepoint directory", lambda: fs.makedirs(directory, exist_ok=True))
    if _io(
        target_url, "checking the savepoint directory", lambda: fs.exists(posixpath.join(directory, METADATA_FILE_NAME))
    ):
        raise CheckpointStorageError(target_url, "a savepoint already exists there")
    copied: dict[str, FileStateHandle] = {}

    def relocate(h: StreamStateHandle) -> StreamStateHandle:
        if not isinstance(h, FileStateHandle) or h.path.startswith(prefix):
            return h
        if h.path in copied:
            return copied[h.path]
        name = posixpath.basename(h.path.rstrip("/"))
        dest = posixpath.join(directory, name)
        sfs, spath = filesystem_for(h.path, storage_options)
        if type(sfs) is type(fs) and sfs.storage_options == fs.storage_options:
            _io(h.path, f"copying a state file to {target_url}", lambda: fs.copy(spath, dest))
        else:
            data = read_stream_handle(h, storage_options)
            _io(_url(fs, dest), "writing a state file", lambda: fs.pipe_file(dest, data))
        copied[h.path] = FileStateHandle(_url(fs, dest), h.size)
        return copied[h.path]

    stored = checkpoint.map_stream_handles(relocate)
    stored.is_savepoint = True
    stored.external_pointer = target_url
    _write_metadata_file(fs, directory, serialize_metadata(stored, relative_to=target_url))
    return target_url, stored


def resolve_restore_location(location: str, storage_options: Mapping[str, Any] | None = None) -> LatestValid:
    """What ``-s PATH`` restores: the savepoint/checkpoint at ``location`` (validated), or, if
    ``location`` is a job's checkpoint directory (``<dir>/<job-id>`` holding ``chk-<n>``), its
    newest valid checkpoint, skipping corrupted or incomplete newer ones. CheckpointMetadataError
    naming the path and the problem if nothing there can be restored."""
    fs, path = filesystem_for(location, storage_options)
    path = path.rstrip("/")
    if posixpath.basename(path) != METADATA_FILE_NAME:

        def listing() -> list[str] | None:
            fs.invalidate_cache(path)
            try:
                return [posixpath.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)]
            except (FileNotFoundError, NotADirectoryError):
                return None

        names = _io(_url(fs, path), "listing the restore path", listing)
        if names is None:
            raise CheckpointMetadataError(_url(fs, path), "no such savepoint or checkpoint directory")
        if METADATA_FILE_NAME not in names and any(_CHK.match(n) for n in names):
            parent, job_id = posixpath.split(path)
            storage = FsCheckpointStorage(_url(fs, parent), job_id, storage_options=storage_options)
            found = storage.find_latest_valid()
            if found.checkpoint is None:
                problems = "; ".join(e.problem for e in found.skipped) or "no checkpoint"
                raise CheckpointMetadataError(_url(fs, path), f"no valid checkpoint to restore ({problems})")
            return found
    checkpoint = read_checkpoint(location, storage_options)
    validate_checkpoint(checkpoint, storage_options)
    return LatestValid(checkpoint)


def make_config_reader(conf: Mapping[str, Any] | None) -> StorageReader:
    """A state reader that finds the storage options of each file's own URL (a savepoint on S3
    restored by a job whose checkpoints go elsewhere)."""
    return StorageReader(
        lambda h: storage_options_from_config(
            conf, h.path if isinstance(h, (FileStateHandle, SharedFileHandle)) else ""
        )
    )
