"""The State Processor API on Spark (issue 8 item 3), with a real local SparkSession (one for the
module): a savepoint bootstrapped from a DataFrame is read back, restores into keyed state
backends at any parallelism with every key in the subtask Flink's formula gives it, and bad
requests are errors that name the path and the problem."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.storage import make_reader, resolve_restore_location
from yarnflink.common.keygroups import key_group_of, key_group_range
from yarnflink.state import HeapKeyedStateBackend, KeyGroupRange, ListStateDescriptor, ValueStateDescriptor
from yarnflink.state.rocksdb import RocksDBKeyedStateBackend
from yarnflink.state_processor import StateProcessorError, bootstrap_savepoint, read_savepoint

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    old = os.environ.get("PYSPARK_PYTHON")
    os.environ["PYSPARK_PYTHON"] = sys.executable  # Python workers need this interpreter (yarnflink, pyarrow)
    session = existing or (
        SparkSession.builder.master("local[2]")
        .appName("state-processor-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.pyspark.python", sys.executable)
        .config("spark.sql.shuffle.partitions", "4")
        .getOrCreate()
    )
    yield session
    if existing is None:
        session.stop()
    if old is None:
        os.environ.pop("PYSPARK_PYTHON", None)
    else:
        os.environ["PYSPARK_PYTHON"] = old


def test_bootstrap_then_read_and_restore_at_any_parallelism(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    data = [(f"user-{i}", i * 10) for i in range(500)]
    df = spark.createDataFrame(data, ["key", "value"])
    path = bootstrap_savepoint(df, f"file://{tmp_path}/boot", "counter", "count", 128, parallelism=3)
    assert path == f"file://{tmp_path}/boot"
    files = sorted(p.name for p in (tmp_path / "boot").iterdir())
    assert "_metadata" in files and len([f for f in files if f.endswith(".arrow")]) == 3
    back = read_savepoint(spark, path, "counter", "count")
    assert sorted((r["key"], r["value"]) for r in back.collect()) == sorted(data)
    checkpoint = resolve_restore_location(path).checkpoint
    assert checkpoint is not None and checkpoint.is_savepoint
    for parallelism, backend_type in (
        (1, HeapKeyedStateBackend),
        (2, HeapKeyedStateBackend),
        (5, HeapKeyedStateBackend),
        (3, RocksDBKeyedStateBackend),
    ):
        assigned = assign_state(checkpoint, [RestoreVertex("v", parallelism, 128, ("counter",))])
        seen = {}
        for i in range(parallelism):
            kgs = KeyGroupRange.of(key_group_range(128, parallelism, i))
            backend = (
                RocksDBKeyedStateBackend(128, kgs, local_dir=str(tmp_path / "rocksdb"))
                if backend_type is RocksDBKeyedStateBackend
                else HeapKeyedStateBackend(128, kgs)
            )
            snap = assigned.get(("v", i))
            if snap is not None:
                backend.restore(snap.get("counter").managed_keyed_state, make_reader())
            state = backend.get_partitioned_state(ValueStateDescriptor("count"))
            for k, v in data:
                if key_group_of(k, 128) in backend.key_group_range:
                    backend.set_current_key(k)
                    seen[k] = state.value()
            backend.dispose()
        assert seen == dict(data)


def test_list_state_and_relocation(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([(1, [1, 2]), (2, [3])], ["key", "value"])
    path = bootstrap_savepoint(df, str(tmp_path / "lists"), "op", "items", 128, kind="list")
    moved = tmp_path / "moved"
    (tmp_path / "lists").rename(moved)
    rows = sorted((r["key"], list(r["value"])) for r in read_savepoint(spark, str(moved), "op", "items").collect())
    assert rows == [(1, [1, 2]), (2, [3])]
    backend = HeapKeyedStateBackend(128, KeyGroupRange(0, 127))
    handles = [
        h
        for s in resolve_restore_location(str(moved)).checkpoint.operator_states["op"].subtask_states.values()
        for h in s.managed_keyed_state
    ]
    backend.restore(handles, make_reader())
    backend.set_current_key(1)
    assert list(backend.get_partitioned_state(ListStateDescriptor("items")).get()) == [1, 2]
    assert path.endswith("/lists")


def test_bad_requests_name_the_problem(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    df = spark.createDataFrame([("a", 1)], ["key", "value"])
    path = bootstrap_savepoint(df, str(tmp_path / "sp"), "op", "count", 128)
    with pytest.raises(StateProcessorError, match=r"no state of an operator with uid 'other' \(operators: op\)"):
        read_savepoint(spark, path, "other", "count")
    with pytest.raises(StateProcessorError, match=r"has no keyed state 'nope' \(its keyed states: count\)"):
        read_savepoint(spark, path, "op", "nope")
    with pytest.raises(Exception, match="a savepoint already exists there"):
        bootstrap_savepoint(df, path, "op", "count", 128)
    with pytest.raises(StateProcessorError, match="max_parallelism must be in 1..32768"):
        bootstrap_savepoint(df, str(tmp_path / "x"), "op", "count", 0)
    with pytest.raises(StateProcessorError, match="kind must be one of"):
        bootstrap_savepoint(df, str(tmp_path / "x"), "op", "count", 128, kind="timers")
    with pytest.raises(Exception, match="no such savepoint or checkpoint directory"):
        read_savepoint(spark, str(tmp_path / "missing"), "op", "count")
    dup = spark.createDataFrame([("a", 1), ("a", 2)], ["key", "value"])
    with pytest.raises(Exception, match="appears more than once"):
        bootstrap_savepoint(dup, str(tmp_path / "dup"), "op", "count", 128)


def test_the_running_values_of_reduce_are_read_too(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A keyed reduce keeps key -> value dicts as union operator state named ``reduce``, one dict
    per subtask: read_savepoint gives all of them as (key, value)."""
    from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
    from yarnflink.checkpoint.storage import FsCheckpointStorage, write_savepoint
    from yarnflink.state import OperatorStateBackend, OperatorSubtaskState

    storage = FsCheckpointStorage(f"file://{tmp_path}/chk", "job", inline_threshold=16)
    storage.initialize()
    factory = storage.stream_factory(3)
    subtasks = {}
    for i, part in enumerate([{"a": ("a", 3)}, {"b": ("b", 5), "c": ("c", 7)}]):
        backend = OperatorStateBackend(f"sum-{i}")
        backend.get_union_list_state(ListStateDescriptor("reduce")).update([part])
        subtasks[i] = OperatorSubtaskState([], [backend.snapshot(3, 0, factory).result().operator])
    staged = CompletedCheckpoint("job", 3, 0, {"sum": OperatorState("sum", 2, 128, subtasks)}, is_savepoint=True)
    path, _ = write_savepoint(staged, f"file://{tmp_path}/sp")
    rows = sorted((r["key"], tuple(r["value"])) for r in read_savepoint(spark, path, "sum", "reduce").collect())
    assert rows == [("a", ("a", 3)), ("b", ("b", 5)), ("c", ("c", 7))]
    with pytest.raises(StateProcessorError, match=r"its keyed states: reduce\)"):
        read_savepoint(spark, path, "sum", "count")


def test_a_savepoint_of_the_rocksdb_backend_is_read(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """read_savepoint reads the keyed state the rocksdb backend wrote (its snapshots are canonical)."""
    from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
    from yarnflink.checkpoint.storage import FsCheckpointStorage, write_savepoint
    from yarnflink.state import OperatorSubtaskState

    storage = FsCheckpointStorage(f"file://{tmp_path}/chk", "job", inline_threshold=16)
    storage.initialize()
    factory = storage.stream_factory(4)
    data = {f"user-{i}": i for i in range(300)}
    subtasks = {}
    for i in range(2):
        backend = RocksDBKeyedStateBackend(128, key_group_range(128, 2, i), local_dir=str(tmp_path / "rocksdb"))
        state = backend.get_partitioned_state(ValueStateDescriptor("count"))
        for k, v in data.items():
            if key_group_of(k, 128) in backend.key_group_range:
                backend.set_current_key(k)
                state.update(v)
        subtasks[i] = OperatorSubtaskState(list(backend.snapshot(4, 0, factory).result().keyed_handles), [])
        backend.dispose()
    staged = CompletedCheckpoint(
        "job", 4, 0, {"counter": OperatorState("counter", 2, 128, subtasks)}, is_savepoint=True
    )
    path, _ = write_savepoint(staged, f"file://{tmp_path}/sp")
    rows = {r["key"]: r["value"] for r in read_savepoint(spark, path, "counter", "count").collect()}
    assert rows == data


@pytest.mark.parametrize("backend_name", ["hashmap", "rocksdb"])
def test_read_an_incremental_checkpoint(spark, tmp_path: Path, backend_name: str) -> None:  # type: ignore[no-untyped-def]
    """A retained incremental checkpoint (hashmap: a base and deltas per subtask; rocksdb: SST
    files shared across the three checkpoints), with updates and removals, reads as the state it
    restores to; the rocksdb one is restored in a temporary directory that is gone afterwards."""
    from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
    from yarnflink.checkpoint.storage import FsCheckpointStorage
    from yarnflink.state.handles import IncrementalKeyedStateHandle, OperatorSubtaskState
    from yarnflink.state.incremental import DELTA

    storage = FsCheckpointStorage(f"file://{tmp_path}/chk", "job")
    storage.initialize()
    expected: dict[str, int] = {}
    subtasks = {}
    for i in range(2):
        rng = key_group_range(128, 2, i)
        b = (
            HeapKeyedStateBackend(128, rng, incremental=True)
            if backend_name == "hashmap"
            else RocksDBKeyedStateBackend(128, rng, local_dir=str(tmp_path / "rocksdb"), incremental=True)
        )
        v = b.get_partitioned_state(ValueStateDescriptor("count"))
        for cid in (1, 2, 3):
            for n in range(300):
                key = f"user-{n}"
                if key_group_of(key, 128) not in rng:
                    continue
                b.set_current_key(key)
                if cid == 3 and n % 10 == 0:
                    v.clear()
                    expected.pop(key, None)
                else:
                    v.update(n * cid)
                    expected[key] = n * cid
            h = b.snapshot(cid, 0, storage.stream_factory(cid)).result().keyed
            b.notify_checkpoint_complete(cid)
        assert isinstance(h, IncrementalKeyedStateHandle) and h.backend == backend_name
        if backend_name == "hashmap":
            assert [f.kind for f in h.shared][1:] == [DELTA, DELTA]
        else:
            assert h.shared and all(f.kind == "sst" for f in h.shared)
        subtasks[i] = OperatorSubtaskState([h])
        b.dispose()
    checkpoint = CompletedCheckpoint("job", 3, 0, {"counter": OperatorState("counter", 2, 128, subtasks)})
    url = storage.write_metadata(checkpoint)
    got = {r["key"]: r["value"] for r in read_savepoint(spark, url, "counter", "count").collect()}
    assert got == expected


def test_a_rocksdb_incremental_handle_is_read_in_a_directory_that_is_then_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decoding a Spark task runs, in this process: a rocksdb incremental checkpoint's
    entries of one state (not of another state, not of a window namespace), with the store it
    was restored into deleted when the task reads them all and when it stops early."""
    from yarnflink.checkpoint.storage import FsCheckpointStorage
    from yarnflink.state_processor.savepoints import _decode_any

    storage = FsCheckpointStorage(f"file://{tmp_path}/chk", "job")
    storage.initialize()
    b = RocksDBKeyedStateBackend(128, KeyGroupRange(0, 127), local_dir=str(tmp_path / "task"), incremental=True)
    count = b.get_partitioned_state(ValueStateDescriptor("count"))
    other = b.get_partitioned_state(ValueStateDescriptor("other"))
    for n in range(200):
        b.set_current_key(f"user-{n}")
        count.update(n)
        other.update(-n)
        if n == 7:
            count.set_current_namespace("window")
            count.update(1000)
            count.set_current_namespace(None)
    h = b.snapshot(1, 0, storage.stream_factory(1)).result().keyed
    b.dispose()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    got = dict(_decode_any((h.to_json(), "count", {}, 128)))
    assert got == {f"user-{n}": n for n in range(200)}
    assert list(scratch.iterdir()) == []
    partial = _decode_any((h.to_json(), "count", {}, 128))
    next(partial)
    assert len(list(scratch.iterdir())) == 1  # the restored store, while the task reads
    partial.close()
    assert list(scratch.iterdir()) == []
