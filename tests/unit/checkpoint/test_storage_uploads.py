"""State files are written from the snapshot's buffer without copies: to a local directory as
they are, to S3 (moto's server) through zero-copy file views, in one PUT or a multipart upload
that is aborted when it fails."""

from __future__ import annotations

import io
import os
import uuid
from typing import Any

import boto3
import pyarrow as pa
import pytest

from yarnflink.checkpoint import storage
from yarnflink.checkpoint.storage import CheckpointStorageError, FsCheckpointStorage, read_stream_handle
from yarnflink.state.handles import ByteStreamStateHandle, FileStateHandle
from yarnflink.state.snapshot_serializer import BufferPieces

BUCKET = "yarnflink-checkpoints"


def _client(options: dict[str, Any]) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=options["endpoint_url"],
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def _s3_storage(options: dict[str, Any]) -> FsCheckpointStorage:
    return FsCheckpointStorage(f"s3://{BUCKET}/{uuid.uuid4().hex}", "job", storage_options=options)


def _payload(size: int) -> tuple[bytes, BufferPieces]:
    """Random bytes and a keyed-state snapshot's payload holding them: Arrow buffers of uneven
    sizes, kept as they were written (a part boundary falls inside a piece)."""
    data = os.urandom(size)
    pieces = BufferPieces()
    for start in range(0, size, 3 << 20):
        pieces.write(pa.py_buffer(data[start : start + (3 << 20)]))
        pieces.write(b"")  # (nothing: not kept)
    return data, pieces


def _etag(options: dict[str, Any], url: str) -> str:
    key = url.split(f"s3://{BUCKET}/", 1)[1]
    return str(_client(options).head_object(Bucket=BUCKET, Key=key)["ETag"])


def test_pieces_and_buffers_are_written_to_local_files_as_they_are(tmp_path: Any) -> None:
    factory = FsCheckpointStorage(f"file://{tmp_path}", "job").stream_factory(1)
    data, pieces = _payload((7 << 20) + 5)
    handle = factory.write_state(pieces, "op")  # type: ignore[arg-type]
    assert isinstance(handle, FileStateHandle) and handle.size == len(data)
    assert read_stream_handle(handle) == data
    assert read_stream_handle(factory.write_state(memoryview(pa.py_buffer(data)), "op")) == data  # type: ignore[arg-type]
    small = factory.write_state(_payload(100)[1], "op")  # type: ignore[arg-type]
    assert isinstance(small, ByteStreamStateHandle) and len(small.data) == 100  # inline


def test_a_small_state_file_is_one_put(s3_server: dict[str, Any]) -> None:
    data, pieces = _payload(300_000)
    handle = _s3_storage(s3_server).stream_factory(1).write_state(pieces, "op")  # type: ignore[arg-type]
    assert isinstance(handle, FileStateHandle) and read_stream_handle(handle, s3_server) == data
    assert "-" not in _etag(s3_server, handle.path)  # not a multipart upload


def test_a_large_state_file_is_uploaded_in_parts(s3_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "S3_PART_SIZE", 5 << 20)  # S3's smallest part size
    data, pieces = _payload((12 << 20) + 123)
    handle = _s3_storage(s3_server).stream_factory(1).write_state(pieces, "op")  # type: ignore[arg-type]
    assert isinstance(handle, FileStateHandle) and handle.size == len(data)
    assert read_stream_handle(handle, s3_server) == data
    assert _etag(s3_server, handle.path).endswith('-3"')  # three parts: 5 MB, 5 MB and the rest


def test_a_failed_multipart_upload_is_aborted(s3_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storage, "S3_PART_SIZE", 1 << 20)  # below S3's 5 MB minimum: completing fails
    _, pieces = _payload(3 << 20)
    target = _s3_storage(s3_server)
    with pytest.raises(CheckpointStorageError, match="writing a state file failed"):
        target.stream_factory(1).write_state(pieces, "op")  # type: ignore[arg-type]
    prefix = target.job_path.split("/", 1)[1]
    uploads = _client(s3_server).list_multipart_uploads(Bucket=BUCKET, Prefix=prefix).get("Uploads", [])
    assert uploads == []
    assert target.fs.find(target.job_path) == []  # nothing half-written is visible


def test_the_buffer_file_reads_a_range_across_buffers() -> None:
    views = [memoryview(b"0123"), memoryview(b""), memoryview(b"4567"), memoryview(b"89")]
    f = storage._BufferFile(views)
    assert len(f) == 10 and f.read(3) == b"012" and f.tell() == 3
    buf = bytearray(4)
    assert f.readinto(buf) == 4 and bytes(buf) == b"3456"
    assert f.read() == b"789" and f.read(5) == b""
    assert f.seek(-2, io.SEEK_END) == 8 and f.read() == b"89"
    assert f.seek(1) == 1 and f.seek(2, io.SEEK_CUR) == 3 and f.read(1) == b"3"
    part = storage._BufferFile(views, 2, 9)
    assert len(part) == 7 and part.read() == b"2345678"
    assert part.seek(0) == 0 and part.read(2) == b"23" and part.read(100) == b"45678"


def test_connect_creates_the_s3_client_before_the_first_checkpoint(s3_server: dict[str, Any], tmp_path: Any) -> None:
    """A task connects its checkpoint storage when it starts, so the first checkpoint does not
    build botocore's client (~0.2 s holding the GIL) on its snapshot thread."""
    target = FsCheckpointStorage(
        f"s3://{BUCKET}/{uuid.uuid4().hex}", "job", storage_options={**s3_server, "skip_instance_cache": True}
    )
    assert getattr(target.fs, "_s3", None) is None
    target.connect()
    assert target.fs._s3 is not None
    FsCheckpointStorage(f"file://{tmp_path}/chk", "job").connect()  # nothing to connect: no error
