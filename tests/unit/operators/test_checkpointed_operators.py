"""Checkpointed built-in operators (issue 5): source positions, keyed reduce state restored per
key group, the exactly-once FileSink's commit protocol. Real files, the real checkpoint storage."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from yarnflink.checkpoint.storage import FsCheckpointStorage, make_reader
from yarnflink.common.records import Batch
from yarnflink.operators.base import OperatorContext
from yarnflink.operators.sinks import FileSink
from yarnflink.operators.sources import SequenceSource
from yarnflink.operators.specs import FileSinkSpec, SequenceSourceSpec
from yarnflink.state.handles import TaskStateSnapshot
from yarnflink.state.task_state import TaskStateManager, snapshot_operators


def ctx(restored: Any = None, subtask: int = 0, parallelism: int = 1) -> OperatorContext:
    c = OperatorContext(
        task_name="t",
        operator_name="op",
        subtask_index=subtask,
        parallelism=parallelism,
        max_parallelism=128,
        operator_id="op-1",
    )
    c.state = TaskStateManager(restored=restored, reader=make_reader())
    return c


def snapshot(op: Any, storage: FsCheckpointStorage, cid: int) -> TaskStateSnapshot:
    snap = snapshot_operators([("op-1", op)], cid, 0, storage.stream_factory(cid)).result()
    return TaskStateSnapshot.from_json(json.loads(json.dumps(snap.to_json())))  # as it travels


def test_sequence_source_resumes_after_the_last_batch_before_the_snapshot(tmp_path: Path) -> None:
    storage = FsCheckpointStorage(f"file://{tmp_path}", "job")
    src = SequenceSource(SequenceSourceSpec(0, 9999))
    src.open(ctx())
    it = src.batches()
    first = [r for _ in range(3) for r in next(it).rows()]
    snap = snapshot(src, storage, 1)
    restored = SequenceSource(SequenceSourceSpec(0, 9999))
    restored.open(ctx(snap))
    rest = [r for b in restored.batches() for r in b.rows()]
    assert first + rest == list(range(10000))


def test_exactly_once_file_sink_commits_on_completion_and_discards_after_restore(tmp_path: Path) -> None:
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    out = tmp_path / "out"
    spec = FileSinkSpec(str(out), "jsonl")
    sink = FileSink(spec)
    sink.open(ctx())
    sink.process_batch(Batch.from_rows([1, 2]))
    snap1 = snapshot(sink, storage, 1)
    sink.process_batch(Batch.from_rows([3]))
    assert not [f for f in os.listdir(out) if f.startswith("part-")]  # nothing committed yet
    sink.notify_checkpoint_complete(1)
    assert sorted(os.listdir(out))[-1] == "part-0-0.jsonl"
    snapshot(sink, storage, 2)  # checkpoint 2 never completes; the task dies after more records
    sink.process_batch(Batch.from_rows([4]))
    # restore checkpoint 1 (already committed): the uncommitted files of 2 and later are discarded
    again = FileSink(spec)
    again.open(ctx(snap1))
    assert sorted(os.listdir(out)) == ["part-0-0.jsonl"]
    again.process_batch(Batch.from_rows([3, 4]))
    again.end_input()
    rows = [json.loads(line) for f in sorted(os.listdir(out)) for line in open(out / f)]
    assert rows == [1, 2, 3, 4]


def test_restore_commits_files_pending_in_the_restored_checkpoint(tmp_path: Path) -> None:
    storage = FsCheckpointStorage(f"file://{tmp_path / 'chk'}", "job")
    out = tmp_path / "out"
    sink = FileSink(FileSinkSpec(str(out), "jsonl"))
    sink.open(ctx())
    sink.process_batch(Batch.from_rows(["a"]))
    snap = snapshot(sink, storage, 7)  # completed, but the notification never arrived
    again = FileSink(FileSinkSpec(str(out), "jsonl"))
    again.open(ctx(snap))
    assert [line.strip() for line in open(out / "part-0-0.jsonl")] == ['"a"']


def test_keyed_sum_restores_each_keys_first_record(tmp_path: Path) -> None:
    """sum/min/max emit the key's first record with the aggregate (PyFlink): the first records are
    checkpointed beside the aggregates (``aggregate-sum-first``), vectorized or per record."""
    from yarnflink.common.records import records_to_arrow
    from yarnflink.operators import specs as S
    from yarnflink.operators.keyed import AggregateOperator
    from yarnflink.operators.sinks import _NullOutput

    from .helpers import ListOutput

    storage = FsCheckpointStorage(f"file://{tmp_path}", "job")
    for arrow in (False, True):
        op = AggregateOperator(S.AggregateSpec("sum", 1, S.KeySelectorSpec(field=0)))
        op.output = _NullOutput()
        op.open(ctx())
        rows = [("a", 1, "first-a"), ("b", 2, "first-b"), ("a", 3, "later")]
        op.process_batch(Batch.from_arrow(records_to_arrow(rows)) if arrow else Batch.from_rows(rows))
        assert op.mode == ("vec" if arrow else "rec")
        snap = snapshot(op, storage, 4 + arrow)
        again = AggregateOperator(S.AggregateSpec("sum", 1, S.KeySelectorSpec(field=0)))
        again.output = out = ListOutput()
        again.open(ctx(snap))
        again.process_batch(Batch.from_rows([("a", 10, "x"), ("b", 1, "y")]))
        assert out.rows == [("a", 14, "first-a"), ("b", 3, "first-b")]
        # snapshotted again after a restore: one entry per state, not the restored ones twice
        third = AggregateOperator(S.AggregateSpec("sum", 1, S.KeySelectorSpec(field=0)))
        third.output = _NullOutput()
        third.open(ctx(snapshot(again, storage, 10 + arrow)))
        assert len(third._checkpointed.value.restored) == len(third._checkpointed_first.value.restored) == 1
        # (the aggregated field of a kept first record does not matter: the output replaces it)
        assert {k: (r[0], r[2]) for k, r in third.rec_first.items()} == {"a": ("a", "first-a"), "b": ("b", "first-b")}


def test_keyed_sum_state_is_restored_per_key_group_at_another_parallelism(tmp_path: Path) -> None:
    from yarnflink.common.keygroups import key_group_of, key_group_range
    from yarnflink.operators import specs as S
    from yarnflink.operators.keyed import AggregateOperator
    from yarnflink.operators.sinks import _NullOutput

    storage = FsCheckpointStorage(f"file://{tmp_path}", "job")
    op = AggregateOperator(S.AggregateSpec("sum", 1, S.KeySelectorSpec(field=0)))
    op.output = _NullOutput()
    op.open(ctx())
    op.process_batch(Batch.from_rows([(k, k * 10) for k in range(50)] * 2))
    snap = snapshot(op, storage, 3)
    for sub in range(2):  # rescaled to parallelism 2: each subtask keeps the keys of its key groups
        again = AggregateOperator(S.AggregateSpec("sum", 1, S.KeySelectorSpec(field=0)))
        again.output = _NullOutput()
        again.open(ctx(snap, subtask=sub, parallelism=2))
        mine = key_group_range(128, 2, sub)
        assert again.rec_state == {k: k * 20 for k in range(50) if key_group_of(k, 128) in mine}
