"""Incremental checkpoints of the hashmap backend (``yarnflink.state.incremental``): chains of a
base and deltas in real checkpoint storage (a local directory), restored exactly, at any
parallelism; a delta costs what changed; bases are written by the materialization rule."""

from __future__ import annotations

import random
from concurrent.futures import Future
from pathlib import Path

import pytest

from tests.unit.state.test_changelog_snapshots import KEYS, LaggingExecutor, _random_change, _read, _states
from yarnflink.checkpoint.metadata import CheckpointMetadataError, CompletedCheckpoint, OperatorState
from yarnflink.checkpoint.storage import (
    CheckpointStorageError,
    FsCheckpointStorage,
    make_reader,
    validate_checkpoint,
)
from yarnflink.state import HeapKeyedStateBackend, ValueStateDescriptor
from yarnflink.state.handles import (
    IncrementalKeyedStateHandle,
    KeyGroupRange,
    KeyGroupsStateHandle,
    OperatorSubtaskState,
    SnapshotResult,
)
from yarnflink.state.incremental import BASE, DELTA, MaterializationRule
from yarnflink.state.task_state import LazyStreamFactory


def storage(tmp_path: Path) -> FsCheckpointStorage:
    s = FsCheckpointStorage(f"file://{tmp_path}/chk", "job")
    s.initialize()
    return s


def backend(rule: MaterializationRule | None = None, rng: range = range(0, 128), **kw: object) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(128, rng, incremental=True, materialization=rule, **kw)  # type: ignore[arg-type]


def restored(handles: list, rng: range = range(0, 128), incremental: bool = False) -> HeapKeyedStateBackend:
    r = HeapKeyedStateBackend(128, rng, incremental=incremental)
    r.restore(handles, make_reader())
    return r


def dump(b: HeapKeyedStateBackend) -> dict:
    """Every entry and timer of a backend, whatever its key groups."""
    out: dict = {}
    for name, table in b._tables.items():
        for kg, m in table.maps.items():
            for ek, v in m.data.items():
                out[(name, kg, repr(ek))] = repr(v)
    for name, q in b._queues.items():
        for kg, ts, key, ns in q.snapshot_entries():
            out[(name, kg, ts, key, ns)] = True
    return out


def handle_of(result: SnapshotResult) -> IncrementalKeyedStateHandle:
    (h,) = result.keyed_handles
    assert isinstance(h, IncrementalKeyedStateHandle)
    return h


def fill(b: HeapKeyedStateBackend, keys: range, value: object) -> None:
    v = b.get_partitioned_state(ValueStateDescriptor("v"))
    for k in keys:
        b.set_current_key(k)
        v.update(value)


@pytest.mark.parametrize("seed", range(8))
def test_every_incremental_checkpoint_restores_the_state_at_its_synchronous_part(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random changes (values, lists, maps, timers, removals), checkpoints whose writes lag and
    whose confirmations come late, in order, or never (aborted): each checkpoint restores to
    the model at its synchronous part, whole and split over two subtasks (rescaling)."""
    from yarnflink.state import heap

    if seed % 2:
        monkeypatch.setattr(heap, "HAND_OFF_WRITES", 7)
    rnd = random.Random(seed)
    st = storage(tmp_path)
    ex = LaggingExecutor()
    b = backend(MaterializationRule(max_deltas=3), executor=ex)
    pending: list[tuple[int, Future, dict]] = []
    kinds = []
    for cid in range(1, 25):
        for _ in range(rnd.randrange(1, 40)):
            _random_change(b, rnd)
        pending.append((cid, b.snapshot(cid, 0, st.stream_factory(cid)), _read(b)))
        while ex.queue and rnd.random() < 0.7:
            ex.run_oldest()
        while pending and pending[0][1].done() and rnd.random() < 0.8:
            done_id, f, model = pending.pop(0)
            h = handle_of(f.result())
            kinds.append(tuple(x.kind for x in h.shared))
            assert _read(restored([h])) == model
            whole = dump(restored([h]))
            low, high = dump(restored([h], range(0, 64))), dump(restored([h], range(64, 128)))
            assert {**low, **high} == whole and len(low) + len(high) == len(whole)
            if rnd.random() < 0.15:
                b.notify_checkpoint_aborted(done_id)
            else:
                b.notify_checkpoint_complete(done_id)
    assert any(DELTA in k for k in kinds) and any(k and set(k) == {BASE} for k in kinds[1:])
    assert all(k.count(DELTA) <= 3 for k in kinds)


def test_a_delta_costs_what_changed_and_builds_on_the_confirmed_chain(tmp_path: Path) -> None:
    st = storage(tmp_path)
    b = backend()
    fill(b, range(20_000), "x" * 40)
    first = handle_of(b.snapshot(1, 0, st.stream_factory(1)).result())
    assert [f.kind for f in first.shared] == [BASE]
    b.notify_checkpoint_complete(1)
    fill(b, range(100), "y")  # 0.5% of the keys
    second = handle_of(b.snapshot(2, 0, st.stream_factory(2)).result())
    assert second.shared[0] == first.shared[0] and [f.kind for f in second.shared] == [BASE, DELTA]
    assert second.checkpointed_size == second.shared[1].size < first.shared[0].size / 50
    # not confirmed yet: checkpoint 3's delta still holds 2's changes (builds on 1)
    fill(b, range(100, 110), "z")
    third = handle_of(b.snapshot(3, 0, st.stream_factory(3)).result())
    assert third.shared[0] == first.shared[0] and len(third.shared) == 2
    assert third.shared[1].size > second.shared[1].size
    assert _read(restored([third])) == _read(b)
    b.notify_checkpoint_complete(3)
    fourth = handle_of(b.snapshot(4, 0, st.stream_factory(4)).result())  # nothing changed: no new file
    assert fourth.shared == third.shared and fourth.checkpointed_size == 0


def test_an_abort_makes_the_next_checkpoint_a_base_and_the_ratio_bounds_the_chain(tmp_path: Path) -> None:
    st = storage(tmp_path)
    b = backend(MaterializationRule(max_deltas=50, max_delta_ratio=0.0))
    fill(b, range(100), 1)
    handle_of(b.snapshot(1, 0, st.stream_factory(1)).result())
    b.notify_checkpoint_complete(1)
    fill(b, range(10), 2)
    assert [f.kind for f in handle_of(b.snapshot(2, 0, st.stream_factory(2)).result()).shared] == [BASE, DELTA]
    b.notify_checkpoint_aborted(2)
    assert [f.kind for f in handle_of(b.snapshot(3, 0, st.stream_factory(3)).result()).shared] == [BASE]
    b.notify_checkpoint_complete(3)
    # a ratio of 0 still lets deltas up to MIN_DELTA_BUDGET through; past it: a base
    fill(b, range(100), "q" * 20_000)
    assert [f.kind for f in handle_of(b.snapshot(4, 0, st.stream_factory(4)).result()).shared] == [BASE]


def test_savepoints_and_storage_without_shared_files_get_a_full_snapshot(tmp_path: Path) -> None:
    st = storage(tmp_path)
    b = backend()
    fill(b, range(50), 1)
    savepoint = LazyStreamFactory(lambda: st.stream_factory(1), shared_state=False)
    (h,) = b.snapshot(1, 0, savepoint).result().keyed_handles
    assert isinstance(h, KeyGroupsStateHandle)
    (inline,) = b.snapshot(2, 0).result().keyed_handles
    assert isinstance(inline, KeyGroupsStateHandle)
    fill(b, range(5), 2)  # the changes since the savepoint are in the next checkpoint's chain
    b.notify_checkpoint_complete(1)
    chk = handle_of(b.snapshot(3, 0, st.stream_factory(3)).result())
    assert _read(restored([chk])) == _read(b)


def test_a_restored_backend_builds_on_its_chain_unless_rescaled_or_foreign(tmp_path: Path) -> None:
    st = storage(tmp_path)
    b = backend()
    fill(b, range(1000), 1)
    h1 = handle_of(b.snapshot(1, 0, st.stream_factory(1)).result())
    r = restored([h1], incremental=True)
    fill(r, range(3), 2)
    prefix = st.shared_url + "/"
    f2 = LazyStreamFactory(lambda: st.stream_factory(2), shared_state=True, shared_prefix=prefix)
    h2 = handle_of(r.snapshot(2, 0, f2).result())
    assert h2.shared[0] == h1.shared[0] and [f.kind for f in h2.shared] == [BASE, DELTA]
    assert _read(restored([h2])) == _read(r)
    # another job's chain (restored with -s from its retained checkpoint): a base of our own
    other = storage(tmp_path / "other")
    r2 = restored([h2], incremental=True)
    f3 = LazyStreamFactory(lambda: other.stream_factory(3), shared_state=True, shared_prefix=other.shared_url + "/")
    assert [f.kind for f in handle_of(r2.snapshot(3, 0, f3).result()).shared] == [BASE]
    # rescaled: no chain of its own key groups to build on
    half = restored([h2], range(0, 64), incremental=True)
    f4 = LazyStreamFactory(lambda: st.stream_factory(4), shared_state=True, shared_prefix=prefix)
    assert [f.kind for f in handle_of(half.snapshot(4, 0, f4).result()).shared] == [BASE]


def test_a_missing_or_corrupt_shared_file_is_named(tmp_path: Path) -> None:
    st = storage(tmp_path)
    b = backend()
    fill(b, range(2000), 1)
    handle_of(b.snapshot(1, 0, st.stream_factory(1)).result())
    b.notify_checkpoint_complete(1)
    fill(b, range(10), 2)
    h = handle_of(b.snapshot(2, 0, st.stream_factory(2)).result())
    op = OperatorState("op", 1, 128, {0: OperatorSubtaskState([h])})
    chk = CompletedCheckpoint("job", 2, 0, {"op": op}, external_pointer=st.checkpoint_url(2))
    validate_checkpoint(chk)
    delta = Path(h.shared[1].path.removeprefix("file://"))
    data = bytearray(delta.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other content
    delta.write_bytes(bytes(data))
    with pytest.raises(CheckpointMetadataError, match=f"shared state file {h.shared[1].path}.*corrupted"):
        validate_checkpoint(chk)
    with pytest.raises(CheckpointStorageError, match="corrupted"):
        restored([h])
    delta.unlink()
    with pytest.raises(CheckpointMetadataError, match=f"shared state file {h.shared[1].path} is missing"):
        validate_checkpoint(chk)


def test_timers_and_keyed_state_after_many_chains_match_a_full_snapshot(tmp_path: Path) -> None:
    """The same random history checkpointed fully and incrementally restores the same."""
    st = storage(tmp_path)
    rnd = random.Random(7)
    inc, full = backend(MaterializationRule(max_deltas=4)), HeapKeyedStateBackend(128, range(0, 128))
    for cid in range(1, 15):
        state = rnd.getstate()
        for b in (inc, full):
            rnd.setstate(state)
            for _ in range(30):
                _random_change(b, rnd)
        h = handle_of(inc.snapshot(cid, 0, st.stream_factory(cid)).result())
        inc.notify_checkpoint_complete(cid)
        f = full.snapshot(cid).result().keyed
        assert _read(restored([h])) == _read(restored([f])) == _read(full)
    assert len(_states(inc)) == 3 and KEYS == 60
    assert KeyGroupRange(0, 127) == h.key_group_range
