import numpy as np
import pyarrow as pa
import pytest

from yarnflink.common.keygroups import operator_indices_for_keys
from yarnflink.common.records import Batch, arrow_to_records, records_to_arrow
from yarnflink.operators import specs as S
from yarnflink.operators.factory import create_partitioner_output
from yarnflink.operators.partitioners import NetworkOutput

from .helpers import RecordingWriter


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def net(partitioning, channels=4, key=None, subtask=0, **kw):
    w = RecordingWriter()
    return w, NetworkOutput(w, partitioning, channels, key, 128, subtask, **kw)


@pytest.mark.parametrize("form", ["rows", "arrow"])
@pytest.mark.parametrize(
    "records,key",
    [
        ([(f"k{i % 37}", i) for i in range(5000)], S.KeySelectorSpec(field=0)),
        ([{"user": i % 53, "v": i} for i in range(5000)], S.KeySelectorSpec(field="user")),
        ([(i % 41, i) for i in range(5000)], S.KeySelectorSpec(fn=lambda r: r[0] % 41)),
    ],
)
def test_hash_sends_every_key_to_exactly_one_channel(form, records, key):
    w, out = net("hash", 3, key, batch_rows=700, clock=lambda: 0.0)  # no buffer timeout flushes mid-test
    for i in range(0, len(records), 900):
        chunk = records[i : i + 900]
        out.emit(Batch.from_rows(chunk) if form == "rows" else Batch.from_arrow(records_to_arrow(chunk)))
    out.end_input()
    assert w.finished == 1
    by_channel = w.rows_by_channel()
    got = [r for rows in by_channel.values() for r in rows]
    assert len(got) == len(records)
    assert sorted(map(repr, got)) == sorted(map(repr, records))
    keyf = (
        (lambda r: r[0])
        if key.fn is None and key.field == 0
        else ((lambda r: r["user"]) if key.field == "user" else key.fn)
    )
    owner = {}
    for ch, rows in by_channel.items():
        for r in rows:
            assert owner.setdefault(keyf(r), ch) == ch  # one channel per key
        # per-channel order preserved (records carry increasing sequence numbers)
        seq = [r[1] if isinstance(r, tuple) else r["v"] for r in rows]
        assert seq == sorted(seq)
    keys = list(owner)
    expected = operator_indices_for_keys(keys, 128, 3).tolist()
    assert [owner[k] for k in keys] == expected
    assert all(rb.num_rows <= 700 for _, rb in w.emitted)
    assert sum(rb.num_rows == 700 for _, rb in w.emitted) >= 5  # coalesced to full batches


def test_forward():
    w, out = net("forward", 4, subtask=2)
    out.emit(Batch.from_rows([1, 2]))
    out.end_input()
    assert [c for c, _ in w.emitted] == [2]
    w, out = net("forward", 1, subtask=3)
    out.emit(Batch.from_rows([1]))
    out.end_input()
    assert [c for c, _ in w.emitted] == [0]
    w = RecordingWriter()
    out = NetworkOutput(w, "forward", 4, None, 128, 1, producer_parallelism=2)
    out.emit(Batch.from_rows([1]))
    out.end_input()
    assert [c for c, _ in w.emitted] == [0]


def test_broadcast():
    w, out = net("broadcast", 3)
    out.emit(Batch.from_rows([1, 2]))
    out.emit(Batch.from_rows([3]))
    out.end_input()
    assert w.emitted == [] and [arrow_to_records(rb) for rb in w.broadcasts] == [[1, 2, 3]]


@pytest.mark.parametrize("partitioning", ["rebalance", "rescale"])
def test_rebalance_is_even(partitioning):
    w, out = net(partitioning, 4, subtask=1, batch_rows=10_000_000)
    for n in [10_000, 5, 7, 3, 10_001, 1, 1, 1]:
        out.emit(Batch.from_arrow(pa.record_batch({"f0": np.arange(n)})))
    out.end_input()
    counts = {ch: len(rows) for ch, rows in w.rows_by_channel().items()}
    assert set(counts) == {0, 1, 2, 3}
    assert sum(counts.values()) == 20_019
    assert max(counts.values()) - min(counts.values()) <= 20


def test_rebalance_small_batches_round_robin():
    w, out = net("rebalance", 3, subtask=0, buffer_timeout_s=0)
    for i in range(6):
        out.emit(Batch.from_rows([i]))
    assert [(c, arrow_to_records(rb)) for c, rb in w.emitted] == [
        (0, [0]),
        (1, [1]),
        (2, [2]),
        (0, [3]),
        (1, [4]),
        (2, [5]),
    ]


def test_shuffle_delivers_everything_randomly():
    w, out = net("shuffle", 4)
    out.emit(Batch.from_rows(list(range(10_000))))
    out.end_input()
    by = w.rows_by_channel()
    assert sorted(r for rows in by.values() for r in rows) == list(range(10_000))
    assert all(len(by[c]) > 2000 for c in range(4))


def test_coalescing_and_flush_at_end():
    w, out = net("forward", 1, batch_rows=100, buffer_timeout_s=-1)
    for i in range(25):
        out.emit(Batch.from_rows([(i, j) for j in range(10)]))
    assert [rb.num_rows for _, rb in w.emitted] == [100, 100]
    assert out.buffered_rows == 50
    out.end_input()
    assert [rb.num_rows for _, rb in w.emitted] == [100, 100, 50] and w.finished == 1
    assert [r for _, rb in w.emitted for r in arrow_to_records(rb)] == [(i, j) for i in range(25) for j in range(10)]
    out.end_input()
    assert w.finished == 1
    with pytest.raises(RuntimeError):
        out.emit(Batch.from_rows([1]))


def test_big_batches_are_sliced():
    w, out = net("forward", 1, batch_rows=1000, buffer_timeout_s=-1)
    out.emit(Batch.from_rows([1, 2]))
    out.emit(Batch.from_rows([3, 4]))
    out.emit(Batch.from_arrow(records_to_arrow(list(range(2500)))))
    out.end_input()
    assert [rb.num_rows for _, rb in w.emitted] == [1000, 1000, 504]
    assert [r for _, rb in w.emitted for r in arrow_to_records(rb)] == [1, 2, 3, 4] + list(range(2500))


def test_schema_change_flushes_instead_of_concatenating():
    w, out = net("forward", 1, buffer_timeout_s=-1)
    out.emit(Batch.from_rows([1, 2]))
    out.emit(Batch.from_rows(["a"]))
    out.emit(Batch.from_rows(["b"]))
    out.end_input()
    assert [arrow_to_records(rb) for _, rb in w.emitted] == [[1, 2], ["a", "b"]]


def test_buffer_timeout_flushes_lazily_and_on_demand():
    clock = FakeClock()
    w = RecordingWriter()
    out = NetworkOutput(w, "forward", 1, None, 128, 0, buffer_timeout_s=0.1, clock=clock)
    out.emit(Batch.from_rows([1]))
    assert w.emitted == [] and out.next_flush_deadline() == pytest.approx(1000.1)
    assert out.flush_if_due() is False
    clock.t += 0.05
    out.emit(Batch.from_rows([2]))
    assert w.emitted == []
    clock.t += 0.06  # the oldest row has now waited 0.11 s
    assert out.flush_if_due() is True
    assert [arrow_to_records(rb) for _, rb in w.emitted] == [[1, 2]]
    assert out.next_flush_deadline() is None
    out.emit(Batch.from_rows([3]))
    clock.t += 0.2
    out.emit(Batch.from_rows([4]))  # lazy flush on emit
    assert [arrow_to_records(rb) for _, rb in w.emitted] == [[1, 2], [3, 4]]
    out.emit(Batch.from_rows([5]))
    out.flush()
    assert arrow_to_records(w.emitted[-1][1]) == [5]


def test_zero_timeout_flushes_every_emit():
    w, out = net("forward", 1, buffer_timeout_s=0)
    out.emit(Batch.from_rows([1]))
    out.emit(Batch.from_rows([2]))
    assert len(w.emitted) == 2


def test_factory_accepts_pickled_key_selector():
    import cloudpickle

    w = RecordingWriter()
    out = create_partitioner_output(w, "hash", 2, cloudpickle.dumps(S.KeySelectorSpec(field=0)), 128, 0)
    out.emit(Batch.from_rows([(1, "a"), (2, "b")]))
    out.end_input()
    assert sum(rb.num_rows for _, rb in w.emitted) == 2


def test_bad_arguments():
    with pytest.raises(ValueError):
        net("zigzag")
    with pytest.raises(ValueError):
        net("hash", 2, None)
