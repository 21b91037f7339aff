"""Self-contained, relocatable savepoints and restore-path resolution (issue 5 items 5 and 8), on
a local directory and on S3 through moto's server: the state files a savepoint refers to are
copied under its directory and referred to by relative paths, so a copied directory restores;
``_metadata`` is validated on read; a job's checkpoint directory restores its newest valid
checkpoint."""

from __future__ import annotations

import posixpath

import pytest

from yarnflink.checkpoint.metadata import (
    CheckpointMetadataError,
    CompletedCheckpoint,
    OperatorState,
    deserialize_metadata,
    serialize_metadata,
)
from yarnflink.checkpoint.storage import (
    FsCheckpointStorage,
    filesystem_for,
    make_reader,
    read_checkpoint,
    resolve_restore_location,
    validate_checkpoint,
    write_savepoint,
)
from yarnflink.common.keygroups import key_group_range
from yarnflink.state import HeapKeyedStateBackend, OperatorSubtaskState, ValueStateDescriptor
from yarnflink.state.handles import FileStateHandle, KeyGroupRange, KeyGroupsStateHandle

from .test_storage import fill


def staged_checkpoint(storage: FsCheckpointStorage, cid: int, n: int = 300) -> CompletedCheckpoint:
    """A savepoint as the coordinator finalizes it: its state files (written by the tasks) under
    the job's ``chk-<cid>``."""
    factory = storage.stream_factory(cid)
    subs = {}
    for i in range(2):
        b = HeapKeyedStateBackend(128, key_group_range(128, 2, i))
        fill(b, n, "sp")
        handle = b.snapshot(cid, 0, factory).result().keyed
        subs[i] = OperatorSubtaskState([handle])
    return CompletedCheckpoint("job-1", cid, 1000, {"op": OperatorState("op", 2, 128, subs)}, is_savepoint=True)


def restore_all(checkpoint: CompletedCheckpoint, options: dict) -> HeapKeyedStateBackend:
    handles = [h for s in checkpoint.operator_states["op"].subtask_states.values() for h in s.managed_keyed_state]
    b = HeapKeyedStateBackend(128, range(0, 128))
    assert b.restore(handles, make_reader(options)) == 300
    return b


def test_a_savepoint_is_self_contained_and_restores_after_being_moved(checkpoint_dir: tuple) -> None:
    url, options = checkpoint_dir
    storage = FsCheckpointStorage(url, "job-1", storage_options=options, inline_threshold=64)
    storage.initialize()
    staged = staged_checkpoint(storage, 7)
    assert all(h.path.startswith(storage.checkpoint_url(7)) for h in staged.stream_handles())
    pointer, stored = write_savepoint(staged, f"{url}/savepoints/sp-1", options)
    assert pointer == f"{url}/savepoints/sp-1" or pointer.endswith("/savepoints/sp-1")
    assert all(isinstance(h, FileStateHandle) and h.path.startswith(pointer + "/") for h in stored.stream_handles())
    fs, sp_path = filesystem_for(pointer, options)
    raw = fs.cat_file(posixpath.join(sp_path, "_metadata"))
    assert b"://" not in raw[18:]  # every reference is relative to the savepoint directory
    # the staging copies can go; the savepoint does not need them
    storage.discard_incomplete(7)
    moved = f"{url}/elsewhere/copy"
    fs.copy(sp_path, filesystem_for(moved, options)[1], recursive=True)
    fs.rm(sp_path, recursive=True)
    found = resolve_restore_location(moved, options)
    assert found.checkpoint is not None and found.checkpoint.is_savepoint
    assert all(h.path.startswith(found.checkpoint.external_pointer + "/") for h in found.checkpoint.stream_handles())
    restored = restore_all(found.checkpoint, options)
    restored.set_current_key(211)
    assert restored.get_partitioned_state(ValueStateDescriptor("v")).value() == "sp-211"
    with pytest.raises(CheckpointMetadataError, match="no such savepoint or checkpoint directory"):
        resolve_restore_location(pointer, options)


def test_restore_path_validation_names_the_path_and_the_problem(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path}"
    storage = FsCheckpointStorage(url, "job-1", inline_threshold=64)
    storage.initialize()
    pointer, stored = write_savepoint(staged_checkpoint(storage, 1), f"{url}/sp", {})
    victim = stored.stream_handles()[0]
    fs, path = filesystem_for(victim.path)
    data = fs.cat_file(path)
    fs.pipe_file(path, data[:-10])  # truncated state file
    with pytest.raises(CheckpointMetadataError, match=r"has \d+ bytes, the metadata recorded") as e:
        resolve_restore_location(pointer)
    assert pointer in str(e.value)
    fs.rm_file(path)
    with pytest.raises(CheckpointMetadataError, match="is missing"):
        validate_checkpoint(read_checkpoint(pointer))
    meta = posixpath.join(filesystem_for(pointer)[1], "_metadata")
    fs.pipe_file(meta, b"garbage that is no metadata file")
    with pytest.raises(CheckpointMetadataError, match="not a yarnflink checkpoint metadata file") as e:
        resolve_restore_location(pointer + "/_metadata")
    assert meta in str(e.value)
    fs.rm_file(meta)
    with pytest.raises(CheckpointMetadataError, match="does not exist"):
        read_checkpoint(pointer)
    with pytest.raises(CheckpointMetadataError, match="no such savepoint"):
        resolve_restore_location(f"{url}/nowhere")


def test_metadata_structure_and_relative_paths_are_checked() -> None:
    def one(handle: KeyGroupsStateHandle, parallelism: int = 2) -> CompletedCheckpoint:
        return CompletedCheckpoint(
            "j",
            1,
            0,
            {"op": OperatorState("op", parallelism, 128, {0: OperatorSubtaskState([handle])})},
            is_savepoint=True,
        )

    good = KeyGroupsStateHandle(KeyGroupRange(0, 63), FileStateHandle("file:///sp/a.arrow", 10))
    data = serialize_metadata(one(good), relative_to="file:///sp")
    assert b"file:///sp" not in data
    assert deserialize_metadata(data, "file:///moved/_metadata").stream_handles()[0].path == "file:///moved/a.arrow"
    escaping = KeyGroupsStateHandle(KeyGroupRange(0, 63), FileStateHandle("../../etc/passwd", 10))
    with pytest.raises(CheckpointMetadataError, match="not a plain path inside the checkpoint directory"):
        deserialize_metadata(serialize_metadata(one(escaping)), "file:///sp/_metadata")
    beyond = KeyGroupsStateHandle(KeyGroupRange(100, 200), FileStateHandle("file:///sp/a.arrow", 10))
    with pytest.raises(CheckpointMetadataError, match="key groups 100..200 outside 0..127"):
        deserialize_metadata(serialize_metadata(one(beyond)), "x/_metadata")
    with pytest.raises(CheckpointMetadataError, match="invalid parallelism 0"):
        deserialize_metadata(serialize_metadata(one(good, parallelism=0)), "x/_metadata")


def test_a_jobs_checkpoint_directory_restores_its_newest_valid_checkpoint(tmp_path) -> None:  # type: ignore[no-untyped-def]
    url = f"file://{tmp_path}"
    storage = FsCheckpointStorage(url, "job-1", inline_threshold=64)
    storage.initialize()
    for cid in (1, 2, 3):
        c = staged_checkpoint(storage, cid)
        c.is_savepoint = False
        storage.write_metadata(c)
    meta3 = posixpath.join(storage.checkpoint_path(3), "_metadata")
    storage.fs.pipe_file(meta3, storage.fs.cat_file(meta3)[:-3])
    found = resolve_restore_location(storage.job_url)
    assert found.checkpoint is not None and found.checkpoint.checkpoint_id == 2
    assert len(found.skipped) == 1 and storage.checkpoint_url(3) in str(found.skipped[0])
    # an explicit checkpoint is not replaced by another one
    with pytest.raises(CheckpointMetadataError, match="truncated"):
        resolve_restore_location(storage.checkpoint_url(3))
    for cid in (1, 2):
        storage.fs.rm_file(posixpath.join(storage.checkpoint_path(cid), "_metadata"))
    with pytest.raises(CheckpointMetadataError, match="no valid checkpoint to restore") as e:
        resolve_restore_location(storage.job_url)
    assert storage.job_url in str(e.value)
