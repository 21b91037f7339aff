"""Checkpoint storage against a real local directory and a real S3 endpoint (moto's server):
layout, inline threshold, atomic metadata, restore with fallback, retention, clear errors."""

from __future__ import annotations

import posixpath
import socket
import time
from pathlib import Path

import pytest

from yarnflink.checkpoint.config import CheckpointConfig
from yarnflink.checkpoint.coordinator import (
    AcknowledgeCheckpoint,
    CheckpointCoordinator,
    CheckpointTask,
    DiscardCheckpoint,
    MetadataWritten,
    TaskRunning,
    Tick,
    WriteMetadata,
)
from yarnflink.checkpoint.metadata import CheckpointMetadataError
from yarnflink.checkpoint.storage import (
    CheckpointStorageError,
    FsCheckpointStorage,
    filesystem_for,
    make_reader,
    storage_options_from_config,
)
from yarnflink.common.keygroups import key_group_range
from yarnflink.state import HeapKeyedStateBackend, OperatorSubtaskState, TaskStateSnapshot, ValueStateDescriptor
from yarnflink.state.handles import ByteStreamStateHandle, FileStateHandle, KeyGroupRange

TASKS = [CheckpointTask(f"t{i}", "v", i, 2, 128, ("op",)) for i in range(2)]


def fill(backend: HeapKeyedStateBackend, n: int, value: str) -> None:
    st = backend.get_partitioned_state(ValueStateDescriptor("v"))
    for k in range(n):
        try:
            backend.set_current_key(k)
        except RuntimeError:
            continue  # another subtask's key
        st.update(f"{value}-{k}")


def run_checkpoint(storage: FsCheckpointStorage, coordinator: CheckpointCoordinator, backends: list, now: int) -> list:
    """One periodic checkpoint through the coordinator, with the real snapshots written to storage."""
    trigger = coordinator.handle(Tick(now))[0]
    cid = trigger.checkpoint_id
    factory = storage.stream_factory(cid)
    actions: list = []
    for i, b in enumerate(backends):
        handle = b.snapshot(cid, now, factory).result().keyed
        snap = TaskStateSnapshot({"op": OperatorSubtaskState([handle] if handle else [])})
        actions = coordinator.handle(AcknowledgeCheckpoint(cid, f"t{i}", snap, now=now))
    (write,) = actions
    assert isinstance(write, WriteMetadata)
    pointer = storage.write_metadata(write.checkpoint)
    result = coordinator.handle(MetadataWritten(cid, pointer, now + 1))
    for a in result:
        if isinstance(a, DiscardCheckpoint):
            storage.discard_checkpoint(a.checkpoint)
    return result


def make(checkpoint_dir: tuple, threshold: int = 20 * 1024) -> FsCheckpointStorage:
    url, options = checkpoint_dir
    storage = FsCheckpointStorage(url, "job-1", storage_options=options, inline_threshold=threshold)
    storage.initialize()
    return storage


def backends_with_state(value: str, n: int = 500) -> list[HeapKeyedStateBackend]:
    out = []
    for i in range(2):
        b = HeapKeyedStateBackend(128, key_group_range(128, 2, i))
        fill(b, n, value)
        out.append(b)
    return out


def test_layout_state_files_inline_threshold_and_restore(checkpoint_dir: tuple) -> None:
    storage = make(checkpoint_dir, threshold=1024)
    coordinator = CheckpointCoordinator("job-1", TASKS, CheckpointConfig(interval_ms=1000, num_retained=2))
    for t in TASKS:
        coordinator.handle(TaskRunning(t.task_id))
    small = [HeapKeyedStateBackend(128, key_group_range(128, 2, i)) for i in range(2)]
    fill(small[0], 3, "tiny")  # a few bytes: inline; subtask 1 stays empty
    big = backends_with_state("big")  # well above 1 KiB: files
    run_checkpoint(storage, coordinator, small, 1000)
    run_checkpoint(storage, coordinator, big, 2000)
    fs, _ = filesystem_for(storage.job_url, checkpoint_dir[1])
    names = sorted(posixpath.basename(p.rstrip("/")) for p in fs.ls(storage.job_path, detail=False))
    assert {"chk-1", "chk-2"} <= set(names)
    first = storage.read_metadata(storage.checkpoint_url(1))
    handles = first.stream_handles()
    assert handles and all(isinstance(h, ByteStreamStateHandle) for h in handles)
    assert [posixpath.basename(p) for p in fs.ls(storage.checkpoint_path(1), detail=False)] == ["_metadata"]
    second = storage.read_metadata(storage.checkpoint_url(2) + "/_metadata")
    files = [h for h in second.stream_handles() if isinstance(h, FileStateHandle)]
    assert len(files) == 2 and all(h.path.startswith(storage.checkpoint_url(2) + "/") for h in files)
    # restore at another parallelism from what storage holds
    latest = storage.find_latest_valid()
    assert latest.checkpoint.checkpoint_id == 2 and latest.skipped == []
    handles = [
        h for s in latest.checkpoint.operator_states["op"].subtask_states.values() for h in s.managed_keyed_state
    ]
    restored = HeapKeyedStateBackend(128, range(0, 128))
    assert restored.restore(handles, make_reader(checkpoint_dir[1])) == 500
    restored.set_current_key(123)
    assert restored.get_partitioned_state(ValueStateDescriptor("v")).value() == "big-123"


def test_retention_deletes_old_checkpoints(checkpoint_dir: tuple) -> None:
    storage = make(checkpoint_dir, threshold=64)
    coordinator = CheckpointCoordinator("job-1", TASKS, CheckpointConfig(interval_ms=1000, num_retained=2))
    for t in TASKS:
        coordinator.handle(TaskRunning(t.task_id))
    for n in range(1, 5):
        run_checkpoint(storage, coordinator, backends_with_state(f"v{n}", 50), n * 1000)
    assert storage.checkpoint_ids() == [3, 4]
    assert [c.checkpoint_id for c in coordinator.completed] == [3, 4]


def test_fallback_to_the_newest_intact_checkpoint(checkpoint_dir: tuple) -> None:
    storage = make(checkpoint_dir, threshold=64)
    coordinator = CheckpointCoordinator("job-1", TASKS, CheckpointConfig(interval_ms=1000, num_retained=10))
    for t in TASKS:
        coordinator.handle(TaskRunning(t.task_id))
    for n in range(1, 5):
        run_checkpoint(storage, coordinator, backends_with_state(f"v{n}", 50), n * 1000)
    fs = storage.fs
    meta = lambda n: posixpath.join(storage.checkpoint_path(n), "_metadata")  # noqa: E731
    # chk-4: a state file is gone; chk-3: _metadata is corrupted; chk-2: _metadata is truncated
    victim = next(
        h for h in storage.read_metadata(storage.checkpoint_url(4)).stream_handles() if isinstance(h, FileStateHandle)
    )
    fs.rm_file(filesystem_for(victim.path, checkpoint_dir[1])[1])
    data = bytearray(fs.cat_file(meta(3)))
    data[-5] ^= 0xFF
    fs.pipe_file(meta(3), bytes(data))
    fs.pipe_file(meta(2), fs.cat_file(meta(2))[:40])
    fs.makedirs(storage.checkpoint_path(5), exist_ok=True)  # chk-5: never finished (no _metadata)
    fs.pipe_file(posixpath.join(storage.checkpoint_path(5), "state.arrow"), b"half")
    latest = storage.find_latest_valid()
    assert latest.checkpoint is not None and latest.checkpoint.checkpoint_id == 1
    problems = [str(e) for e in latest.skipped]
    assert len(problems) == 4
    assert storage.checkpoint_url(5) + "/_metadata" in problems[0] and "does not exist" in problems[0]
    assert "state file" in problems[1] and "is missing" in problems[1] and victim.path in problems[1]
    assert storage.checkpoint_url(3) + "/_metadata" in problems[2] and "checksum mismatch" in problems[2]
    assert storage.checkpoint_url(2) + "/_metadata" in problems[3] and "truncated" in problems[3]
    with pytest.raises(CheckpointMetadataError, match="checksum mismatch: the file is corrupted"):
        storage.read_metadata(storage.checkpoint_url(3))


def test_metadata_is_written_atomically_on_a_local_file_system(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = make((f"file://{tmp_path}", {}))
    coordinator = CheckpointCoordinator("job-1", TASKS, CheckpointConfig(interval_ms=1000))
    for t in TASKS:
        coordinator.handle(TaskRunning(t.task_id))
    calls: list = []
    real_mv = storage.fs.mv

    def spy_mv(src, dst, **kw):  # type: ignore[no-untyped-def]
        calls.append(
            (posixpath.basename(src), posixpath.basename(dst), (tmp_path / "job-1" / "chk-1" / "_metadata").exists())
        )
        return real_mv(src, dst, **kw)

    storage.fs.mv = spy_mv  # type: ignore[method-assign]
    try:
        run_checkpoint(storage, coordinator, backends_with_state("x", 10), 1000)
    finally:
        del storage.fs.mv
    ((src, dst, existed),) = calls
    assert src.startswith("._metadata.inprogress-") and dst == "_metadata" and not existed
    assert sorted(p.name for p in (tmp_path / "job-1" / "chk-1").iterdir()) == ["_metadata"]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_s3_endpoint_is_a_clear_error() -> None:
    pytest.importorskip("s3fs")
    options = {
        "endpoint_url": f"http://127.0.0.1:{_closed_port()}",
        "key": "k",
        "secret": "s",
        "client_kwargs": {"region_name": "us-east-1"},
        "config_kwargs": {"connect_timeout": 1, "read_timeout": 1, "retries": {"max_attempts": 1}},
        "retries": 1,
    }
    start = time.monotonic()
    storage = FsCheckpointStorage("s3://nowhere/checkpoints", "job-1", storage_options=options)
    with pytest.raises(CheckpointStorageError) as e:
        storage.initialize()
    assert "checkpoint storage s3://nowhere/checkpoints/job-1" in str(e.value)
    assert "creating the checkpoint directory failed" in str(e.value)
    with pytest.raises(CheckpointStorageError, match=r"s3://nowhere/checkpoints/job-1/chk-7/_metadata"):
        storage.read_metadata(storage.checkpoint_url(7))
    assert time.monotonic() - start < 60


def test_hdfs_without_a_reachable_namenode_is_a_clear_error() -> None:
    with pytest.raises(CheckpointStorageError, match=r"checkpoint storage hdfs://127\.0\.0\.1:\d+/checkpoints"):
        storage = FsCheckpointStorage(f"hdfs://127.0.0.1:{_closed_port()}/checkpoints", "job-1")
        storage.initialize()


def test_unset_directory_and_s3_options_from_flink_keys() -> None:
    with pytest.raises(CheckpointStorageError, match="execution.checkpointing.dir is not set"):
        FsCheckpointStorage("", "job")
    opts = storage_options_from_config(
        {
            "s3.endpoint": "http://127.0.0.1:9000",
            "s3.access-key": "a",
            "s3.secret-key": "b",
            "s3.path.style.access": "true",
        },
        "s3://b/c",
    )
    assert opts == {
        "endpoint_url": "http://127.0.0.1:9000",
        "key": "a",
        "secret": "b",
        "config_kwargs": {"s3": {"addressing_style": "path"}},
    }
    assert storage_options_from_config({"s3.endpoint": "x"}, "file:///tmp") == {}


def test_a_download_copies_in_pieces_and_checks_size_and_content_hash(
    checkpoint_dir: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``StorageReader.copy_to`` (what a rocksdb restore downloads its files with) copies a state
    file of several pieces to a local file, byte for byte; a shared file whose bytes changed, or
    a file shorter than recorded, is refused naming it, and no local file is left behind."""
    import os

    from yarnflink.state.streams import download

    storage = make(checkpoint_dir, threshold=64)
    factory = storage.stream_factory(1)
    data = os.urandom(3 * 1000 + 17)
    private = factory.write_state(data, "private")
    shared = factory.write_shared(data, "shared", KeyGroupRange(0, 127), "sst")
    reader = make_reader(checkpoint_dir[1])
    monkeypatch.setattr("yarnflink.checkpoint.storage.DOWNLOAD_CHUNK_BYTES", 1000)  # four pieces
    for h in (private, shared, ByteStreamStateHandle("inline", b"abc")):
        dest = str(tmp_path / "copy")
        download(reader, h, dest)
        with open(dest, "rb") as f:
            assert f.read() == (b"abc" if isinstance(h, ByteStreamStateHandle) else data)
    fs, path = filesystem_for(shared.path, checkpoint_dir[1])
    fs.pipe_file(path, data[:-1] + bytes([data[-1] ^ 1]))
    dest = str(tmp_path / "bad")
    with pytest.raises(CheckpointStorageError, match="the shared state file is corrupted") as e:
        download(reader, shared, dest)
    assert shared.path in str(e.value) and not os.path.exists(dest)
    fs, path = filesystem_for(private.path, checkpoint_dir[1])
    fs.pipe_file(path, data[:100])
    with pytest.raises(CheckpointStorageError, match=f"has 100 bytes, the checkpoint recorded {len(data)}"):
        download(reader, private, dest)
    assert not os.path.exists(dest)


def test_a_local_file_is_written_as_a_state_file_without_reading_it_whole(
    checkpoint_dir: tuple, tmp_path: Path
) -> None:
    """``write_state_file`` / ``write_shared_file`` (a rocksdb snapshot's spooled Arrow files
    and SST files) give what ``write_state`` / ``write_shared`` of the same bytes give: a file
    of those bytes (inline below the threshold), a shared one with the same content hash."""
    import os

    from yarnflink.state.streams import content_hash, write_shared_file, write_state_file

    storage = make(checkpoint_dir, threshold=64)
    factory = storage.stream_factory(1)
    reader = make_reader(checkpoint_dir[1])
    data = os.urandom(100_000)
    local = tmp_path / "spooled.arrow"
    local.write_bytes(data)
    h = write_state_file(factory, str(local), "rows")
    assert isinstance(h, FileStateHandle) and h.state_size == len(data) and reader(h) == data
    shared = write_shared_file(factory, str(local), "000012.sst", KeyGroupRange(0, 63), "sst")
    assert shared.content_hash == content_hash([data]) and shared.size == len(data) and reader(shared) == data
    (tmp_path / "small").write_bytes(b"tiny")
    assert write_state_file(factory, str(tmp_path / "small"), "timers") == ByteStreamStateHandle("timers", b"tiny")
