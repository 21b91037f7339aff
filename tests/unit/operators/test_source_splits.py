"""Split-based source state: a source checkpointed at one parallelism restores at another and
every record is emitted exactly once (real snapshots in real checkpoint storage, redistributed by
``assign_state`` as a restore does)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from yarnflink.checkpoint.assignment import RestoreVertex, assign_state
from yarnflink.checkpoint.metadata import CompletedCheckpoint, OperatorState
from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.sources import (
    CollectionSource,
    FileSource,
    SequenceSource,
    SourceStateError,
    range_owner_splits,
)
from yarnflink.operators.specs import CollectionSourceSpec, FileSourceSpec, SequenceSourceSpec
from yarnflink.state.descriptors import ListStateDescriptor
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.state.operator_state import OperatorStateBackend
from yarnflink.state.task_state import TaskStateManager, snapshot_operators

OP = "src-1"


def _ctx(subtask: int, parallelism: int, restored: Any = None, max_parallelism: int = 128) -> OperatorContext:
    c = OperatorContext(
        task_name="t",
        operator_name="src",
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        operator_id=OP,
    )
    c.state = TaskStateManager(restored=restored, reader=make_reader())
    return c


def _snapshot(op: Any, storage: FsCheckpointStorage, cid: int) -> TaskStateSnapshot:
    snap = snapshot_operators([(OP, op)], cid, 0, storage.stream_factory(cid)).result()
    return TaskStateSnapshot.from_json(json.loads(json.dumps(snap.to_json())))  # as it travels


def _rows(batch: Any) -> list:
    return list(batch.rows())


def _run_phase(
    make: Any,
    parallelism: int,
    restored: dict,
    storage: FsCheckpointStorage,
    cid: int,
    batches_each: int,
    max_parallelism: int = 128,
) -> tuple[list, dict]:
    """Every subtask reads ``batches_each`` batches (None: to the end), then all snapshot; the
    checkpoint is redistributed for the next phase's parallelism by the caller."""
    emitted: list = []
    ops = []
    for i in range(parallelism):
        op = make()
        op.batch_rows = 3
        op.open(_ctx(i, parallelism, restored.get(i), max_parallelism))
        it = op.batches() if batches_each != 0 else iter(())  # 0: snapshot before the first batch
        n = 0
        for b in it:
            emitted += _rows(b)
            n += 1
            if batches_each is not None and n >= batches_each:
                break
        ops.append(op)
    op_state = OperatorState(OP, parallelism, max_parallelism)
    for i, op in enumerate(ops):
        snap = _snapshot(op, storage, cid)
        if OP in snap.subtask_states:
            op_state.subtask_states[i] = snap.subtask_states[OP]
    return emitted, CompletedCheckpoint("job", cid, 0, {OP: op_state})


def _rescale_run(make: Any, tmp_path: Path, plan: list[tuple[int, Any]], max_parallelism: int = 128) -> list:
    """``plan``: (parallelism, batches per subtask) per phase; the last phase reads to the end."""
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    restored: dict = {}
    out: list = []
    for cid, (p, each) in enumerate(plan, start=1):
        emitted, checkpoint = _run_phase(make, p, restored, storage, cid, each, max_parallelism)
        out += emitted
        if cid < len(plan):
            nxt = plan[cid][0]
            assigned = assign_state(checkpoint, [RestoreVertex("v", nxt, max_parallelism, (OP,))])
            restored = {i: snap for (_, i), snap in assigned.items()}
    return out


def test_sequence_source_rescales_2_3_1_exactly_once(tmp_path: Path) -> None:
    got = _rescale_run(lambda: SequenceSource(SequenceSourceSpec(0, 999)), tmp_path, [(2, 5), (3, 7), (1, None)])
    assert sorted(got) == list(range(1000))


def test_collection_source_rescales_2_3_1_exactly_once(tmp_path: Path) -> None:
    items = [f"item-{i}" for i in range(500)]
    got = _rescale_run(lambda: CollectionSource(CollectionSourceSpec(items)), tmp_path, [(2, 4), (3, 9), (1, None)])
    assert sorted(got) == sorted(items)


def test_file_source_rescales_2_3_1_exactly_once(tmp_path: Path) -> None:
    data = tmp_path / "in"
    data.mkdir()
    want = []
    for f in range(5):
        rows = [{"f": f, "n": j} for j in range(17)]
        pq.write_table(pa.Table.from_pylist(rows), data / f"part-{f}.parquet")
        want += rows
    got = _rescale_run(lambda: FileSource(FileSourceSpec(str(data), "parquet")), tmp_path, [(2, 4), (3, 3), (1, None)])
    key = lambda r: (r["f"], r["n"])  # noqa: E731
    assert sorted(got, key=key) == sorted(want, key=key)


def test_a_subtask_without_splits_after_a_scale_up_emits_nothing(tmp_path: Path) -> None:
    """Max parallelism 2 -> 2 splits; at parallelism 4 two subtasks own none (not a fresh start)."""
    got = _rescale_run(
        lambda: SequenceSource(SequenceSourceSpec(1, 60)), tmp_path, [(2, 2), (4, None)], max_parallelism=2
    )
    assert sorted(got) == list(range(1, 61))


def test_split_ownership_is_contiguous_and_complete() -> None:
    for n, p in [(128, 3), (4, 8), (7, 7), (1, 1)]:
        owned = [k for i in range(p) for k in range_owner_splits(n, p, i)]
        assert owned == list(range(n))


def _legacy_snapshot(storage: FsCheckpointStorage, value: Any) -> TaskStateSnapshot:
    """A subtask snapshot as older versions wrote it: list state ``source-position``."""
    backend = OperatorStateBackend("src")
    backend.get_list_state(ListStateDescriptor("source-position")).update([value])
    result = backend.snapshot(1, 0, storage.stream_factory(1)).result()
    from yarnflink.state.handles import OperatorSubtaskState

    snap = TaskStateSnapshot()
    snap.subtask_states[OP] = OperatorSubtaskState([], [result.operator])
    return TaskStateSnapshot.from_json(json.loads(json.dumps(snap.to_json())))


def test_older_sequence_position_restores_at_unchanged_parallelism(tmp_path: Path) -> None:
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    # parallelism 2 of [0, 99]: subtask 0 had [0, 50) and emitted up to 20, subtask 1 [50, 100) up to 77
    got = []
    for i, pos in enumerate([20, 77]):
        src = SequenceSource(SequenceSourceSpec(0, 99))
        src.open(_ctx(i, 2, _legacy_snapshot(storage, pos)))
        got += [r for b in src.batches() for r in b.rows()]
    assert got == list(range(20, 50)) + list(range(77, 100))


def test_older_position_at_another_parallelism_is_a_clear_error(tmp_path: Path) -> None:
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    both = [_legacy_snapshot(storage, 20), _legacy_snapshot(storage, 77)]
    op_state = OperatorState(OP, 2, 128)
    for i, s in enumerate(both):
        op_state.subtask_states[i] = s.subtask_states[OP]
    assigned = assign_state(CompletedCheckpoint("job", 1, 0, {OP: op_state}), [RestoreVertex("v", 1, 128, (OP,))])
    src = SequenceSource(SequenceSourceSpec(0, 99))
    src.open(_ctx(0, 1, assigned[("v", 0)]))
    with pytest.raises(SourceStateError, match="original parallelism"):
        list(src.batches())


def test_splits_of_a_finished_subtask_are_not_read_again(tmp_path: Path) -> None:
    """A finished subtask acknowledges checkpoints without state: its splits are absent, so done."""
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    ops, got = [], []
    for i in range(2):
        op = SequenceSource(SequenceSourceSpec(0, 99))
        op.batch_rows = 10
        op.open(_ctx(i, 2))
        it = op.batches()
        got += [r for _ in range(2 if i == 0 else 100) for b in [next(it, None)] if b is not None for r in b.rows()]
        ops.append(op)
    op_state = OperatorState(OP, 2, 128)
    op_state.subtask_states[0] = _snapshot(ops[0], storage, 1).subtask_states[OP]  # subtask 1 finished
    assigned = assign_state(CompletedCheckpoint("job", 1, 0, {OP: op_state}), [RestoreVertex("v", 3, 128, (OP,))])
    for i in range(3):
        src = SequenceSource(SequenceSourceSpec(0, 99))
        src.open(_ctx(i, 3, assigned.get(("v", i))))
        got += [r for b in src.batches() for r in b.rows()]
    assert sorted(got) == list(range(100))


def test_a_snapshot_before_the_first_batch_holds_every_split(tmp_path: Path) -> None:
    got = _rescale_run(
        lambda: CollectionSource(CollectionSourceSpec(list(range(40)))), tmp_path, [(2, 0), (3, 1), (1, None)]
    )
    assert sorted(got) == list(range(40))


def test_exactly_once_file_sink_commits_old_subtasks_files_after_a_rescale(tmp_path: Path) -> None:
    """Sink state taken at 3 restored at 2: every pending file is committed once, under its old
    subtask's name; new files never overwrite committed ones; leftovers are deleted."""
    from yarnflink.common.records import Batch
    from yarnflink.operators.sinks import FileSink
    from yarnflink.operators.specs import FileSinkSpec

    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    out = tmp_path / "out"
    spec = FileSinkSpec(str(out), "jsonl")

    def phase(p: int, restored: dict, first: int, cid: int, complete: bool) -> CompletedCheckpoint:
        op_state = OperatorState(OP, p, 128)
        for i in range(p):
            sink = FileSink(spec)
            sink.open(_ctx(i, p, restored.get(i)))
            sink.process_batch(Batch.from_rows([first + i]))
            if complete:  # an earlier checkpoint completed: that file is committed
                op_state.subtask_states[i] = _snapshot(sink, storage, cid).subtask_states[OP]
                sink.notify_checkpoint_complete(cid)
                sink.process_batch(Batch.from_rows([first + 10 + i]))
            op_state.subtask_states[i] = _snapshot(sink, storage, cid + 1).subtask_states[OP]  # pending
            sink.process_batch(Batch.from_rows([-1]))  # after the checkpoint: lost with the task
        return CompletedCheckpoint("job", cid + 1, 0, {OP: op_state})

    chk = phase(3, {}, 100, 1, True)
    assigned = assign_state(chk, [RestoreVertex("v", 2, 128, (OP,))])
    chk = phase(2, {i: s for (_, i), s in assigned.items()}, 200, 3, False)
    assigned = assign_state(chk, [RestoreVertex("v", 1, 128, (OP,))])
    final = FileSink(spec)
    final.open(_ctx(0, 1, assigned[("v", 0)]))
    final.end_input()
    files = sorted(f.name for f in out.iterdir())
    rows = sorted(json.loads(line) for f in out.glob("part-*") for line in f.read_text().splitlines())
    assert rows == [100, 101, 102, 110, 111, 112, 200, 201]
    assert not [f for f in files if f.endswith(".inprogress")]
    assert len([f for f in files if f.startswith("part-")]) == 8
